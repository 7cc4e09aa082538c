"""Large inputs fail fast and small: wall time and peak memory of reading big TREC files,
valid and with one error, each in a fresh child process.

    python bench/bad_input_memory.py [--lines 5000000] [--docs 1000000] [--src DIR]

Runs are read as `grade` reads them (`read_run`, the whole run) and as `evaluate` does (the
qrels, then the run block by block against them): valid, with a bad score on line 2 and on
the last line, and a file of the same size without any newline (with `--dev-zero`, also
`/dev/zero`, a stream that never ends). Qrels of `--lines` lines are read as `evaluate` reads
them: all distinct, and all the same line (the error is on line 2). Each error case must name
the right line and must not peak above the valid read of the same size: the ratio is printed.

Peak RSS is the child's ru_maxrss (os.wait4), so the cases do not share an allocator. With
`--docs N`, the same for a docs JSONL of N documents read whole vs. only the 645 a selection
needs (what `relgrade grade` with an LLM judge reads). `--src` runs the readers of another
checkout (e.g. main, for before/after numbers).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORK = Path("/tmp/relgrade-bench-bad-input")

READ_RUN = """
import sys
from grader.errors import InputError
from grader.io.trec import read_run
try:
    frame = read_run(sys.argv[1])
    print(f"read {len(frame)} rows")
except InputError as exc:
    print(f"error: {exc}"[:160])
"""

EVALUATE_RUN = """
import sys
from grader.evaluation.files import judged_run_file, read_grades
from grader.errors import InputError
try:
    judged, _ = read_grades(sys.argv[2], clamp=False)
    run = judged_run_file(sys.argv[1], judged, precision="float32", depth=None)
    print(f"read {run.rows} rows")
except InputError as exc:
    print(f"error: {exc}"[:160])
"""

READ_QRELS = """
import sys
from grader.evaluation.files import read_grades
from grader.errors import InputError
try:
    judged, _ = read_grades(sys.argv[1], clamp=False)
    print(f"read the qrels of {judged.n_queries} queries")
except InputError as exc:
    print(f"error: {exc}"[:160])
"""

READ_DOCS = """
import sys
from grader.io.docs import read_docs
ids = None if sys.argv[2] == "all" else set(sys.argv[2].split(","))
docs = read_docs(sys.argv[1], ids=ids)
print(f"kept {len(docs)} docs")
"""


def write_run(path: Path, lines: int, bad: set[int]) -> None:
    """A run of `lines` lines (1,000 per query); a line number in `bad` gets the score `abc`."""
    with path.open("w") as fh:
        chunk: list[str] = []
        for i in range(lines):
            score = "abc" if i + 1 in bad else f"{1000 - i % 1000}.25"
            chunk.append(f"{i // 1000} Q0 doc{i} {i % 1000 + 1} {score} bench\n")
            if len(chunk) == 100_000:
                fh.write("".join(chunk))
                chunk = []
        fh.write("".join(chunk))


def write_qrels(path: Path, lines: int, *, same: bool) -> None:
    """Qrels of `lines` lines (1,000 per query), or `lines` copies of one line."""
    with path.open("w") as fh:
        if same:
            line = "0 0 doc0 1\n"
            for start in range(0, lines, 100_000):
                fh.write(line * min(100_000, lines - start))
            return
        for start in range(0, lines, 100_000):
            rows = range(start, min(start + 100_000, lines))
            fh.write("".join(f"{i // 1000} 0 doc{i} {i % 4}\n" for i in rows))


def write_flat(path: Path, size: int) -> None:
    """`size` bytes without a newline."""
    with path.open("wb") as fh:
        for start in range(0, size, 1 << 24):
            fh.write(b"a" * min(1 << 24, size - start))


def write_docs(path: Path, n: int) -> None:
    text = " ".join(["a passage of ordinary length about retrieval and grading"] * 8)
    with path.open("w") as fh:
        for i in range(n):
            fh.write(json.dumps({"doc_id": f"d{i}", "text": f"{text} {i}"}) + "\n")


def measure(script: str, args: list[str], src: Path) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in MB, what the child printed) of one child process."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    start = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        env=env,
        cwd=WORK,  # not this checkout: `-c` puts the working folder first on sys.path
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    out = proc.stdout.read().strip()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if proc.returncode:
        raise SystemExit(f"child failed ({proc.returncode}): {out}")
    return wall, usage.ru_maxrss / 1024, out  # ru_maxrss is in KiB on Linux


def _case(name: str, script: str, args: list[str], src: Path, base: tuple[float, float]) -> None:
    wall, rss, out = measure(script, args, src)
    print(
        f"  {name:16s} {wall:6.2f} s  peak {rss:7.0f} MB  "
        f"(x{wall / base[0]:.2f} time, x{rss / base[1]:.2f} memory)  {out[:90]}"
    )


def bench_runs(lines: int, src: Path, dev_zero: bool) -> None:
    paths = {}
    for name, bad in {"valid": set(), "bad line 2": {2}, "bad last line": {lines}}.items():
        paths[name] = WORK / f"run-{lines}-{'-'.join(map(str, sorted(bad))) or 'ok'}.txt"
        if not paths[name].exists():
            write_run(paths[name], lines, bad)
    flat = WORK / f"flat-{lines}.txt"
    if not flat.exists():
        write_flat(flat, paths["valid"].stat().st_size)
    qrels = WORK / f"qrels-for-run-{lines}.txt"
    if not qrels.exists():
        write_qrels(qrels, lines // 10, same=False)
    size = paths["valid"].stat().st_size / 1e6
    for reader, script, extra in (
        ("grade (read_run)", READ_RUN, []),
        ("evaluate (blocks)", EVALUATE_RUN, [str(qrels)]),
    ):
        print(f"run of {lines:,} lines, {size:.0f} MB, read as {reader} ({src}):")
        wall, rss, out = measure(script, [str(paths["valid"]), *extra], src)
        print(f"  {'valid':16s} {wall:6.2f} s  peak {rss:7.0f} MB  {out[:90]}")
        for name in ("bad line 2", "bad last line"):
            _case(name, script, [str(paths[name]), *extra], src, (wall, rss))
        _case("no newline", script, [str(flat), *extra], src, (wall, rss))
        if dev_zero:
            _case("/dev/zero", script, ["/dev/zero", *extra], src, (wall, rss))


def bench_qrels(lines: int, src: Path) -> None:
    print(f"qrels of {lines:,} lines, read as evaluate reads them ({src}):")
    paths = {}
    for name, same in (("distinct", False), ("all the same", True)):
        paths[name] = WORK / f"qrels-{lines}-{'same' if same else 'ok'}.txt"
        if not paths[name].exists():
            write_qrels(paths[name], lines, same=same)
    wall, rss, out = measure(READ_QRELS, [str(paths["distinct"])], src)
    print(f"  {'distinct':16s} {wall:6.2f} s  peak {rss:7.0f} MB  {out[:90]}")
    _case("all the same", READ_QRELS, [str(paths["all the same"])], src, (wall, rss))


def bench_docs(n: int, src: Path) -> None:
    path = WORK / f"docs-{n}.jsonl"
    if not path.exists():
        write_docs(path, n)
    needed = ",".join(f"d{i}" for i in range(0, n, max(1, n // 645))[:645])
    print(f"docs JSONL of {n:,} docs, {path.stat().st_size / 1e6:.0f} MB ({src}):")
    for name, ids in (("all docs", "all"), ("needed 645", needed)):
        wall, rss, out = measure(READ_DOCS, [str(path), ids], src)
        print(f"  {name:14s} {wall:6.2f} s  peak {rss:7.0f} MB  {out}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=5_000_000)
    parser.add_argument("--docs", type=int, default=0, help="also bench a docs file of N docs")
    parser.add_argument(
        "--dev-zero",
        action="store_true",
        help="also read /dev/zero as a run (never with --src of a checkout before issue 25: "
        "its readers filled memory until killed)",
    )
    parser.add_argument("--src", type=Path, default=ROOT, help="checkout whose readers to run")
    args = parser.parse_args()
    WORK.mkdir(exist_ok=True)
    bench_runs(args.lines, args.src.resolve(), args.dev_zero)
    bench_qrels(args.lines, args.src.resolve())
    if args.docs:
        bench_docs(args.docs, args.src.resolve())
    print(f"(inputs kept in {WORK}; remove it when done)")


if __name__ == "__main__":
    main()
