"""Whether sqlite3's identity adapters for None and bytes pay on a case a user sees.

Identity adapters (`sqlite3.register_adapter(type(None), f)`, the same for bytes) give None and
bytes back unchanged, which skips sqlite3's search for an adapter when a judgments row binds
them. They are process-wide (`sqlite3.adapters`), so a store that registered them would change
every sqlite3 user of the process; it registers none. This bench measures what they buy where
it shows: the
first `relgrade grade --judge lexical` of a run (every pair graded and written to a new store),
in a child process with the adapters registered (A) and without (B), alternated A B B A ...,
and prints each run's wall and CPU seconds and the medians. The adapters change CPU work only
(how a value is bound); the wall time of a first grading waits mostly on the disk (about 7 CPU-s
in 10-50 s for 20,000 pairs on a shared machine), so compare the CPU medians and rerun before
reading a wall difference.

    python bench/store_adapters.py [--pairs 50000] [--pool 20000] [--rounds 2] [--seed 1]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from grade_scale import write_workload  # noqa: E402

CHILD = """
import sys
if sys.argv[1] == "A":
    import sqlite3
    sqlite3.register_adapter(type(None), lambda value: value)
    sqlite3.register_adapter(bytes, lambda value: value)
from grader.cli.main import main
sys.exit(main(sys.argv[2:]))
"""


def one_run(variant: str, files: tuple[Path, Path, Path], store: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one first grading into the new store `store`."""
    queries, docs, run = files
    args = ["grade", "--queries", str(queries), "--docs", str(docs), "--run", str(run)]
    args += ["--judge", "lexical", "--depth", "100", "--store", str(store), "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, variant, *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"relgrade grade failed: {err[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=50_000)
    parser.add_argument("--pool", type=int, default=20_000, help="passages in the collection")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of A B B A")
    parser.add_argument("--seed", type=int, default=1)
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        files = write_workload(folder, opts.pairs, opts.pool, opts.seed)
        times: dict[str, list[tuple[float, float]]] = {"A": [], "B": []}
        for r in range(opts.rounds):
            for i, variant in enumerate("ABBA"):
                store = folder / f"s{r}{i}.db"
                seconds, cpu_s = one_run(variant, files, store)
                times[variant].append((seconds, cpu_s))
                line = f"round {r + 1} {variant}: {seconds:.2f} s wall, {cpu_s:.2f} CPU-s"
                print(line, flush=True)
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{store}{suffix}").unlink(missing_ok=True)
    wall = {v: statistics.median(w for w, _ in t) for v, t in times.items()}
    cpu = {v: statistics.median(c for _, c in t) for v, t in times.items()}
    print(
        f"{opts.pairs:,} pairs, first grading (lexical): median wall A (adapters) "
        f"{wall['A']:.2f} s, B (none) {wall['B']:.2f} s ({(wall['B'] / wall['A'] - 1) * 100:+.1f}%"
        f" without); median CPU A {cpu['A']:.2f} s, B {cpu['B']:.2f} s "
        f"({(cpu['B'] / cpu['A'] - 1) * 100:+.1f}% without)"
    )


if __name__ == "__main__":
    main()
