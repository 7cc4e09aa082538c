"""`relgrade grade` against hostile servers on a real socket: wall time, peak memory of the
command, and what the server counted (requests, answers it completed, hang-ups it saw).

Cases (the fake server of tests/fakeserver.py, in this process; the command a child process):

- `ok`: one pair, a healthy server (the baseline: start-up and one request);
- `trickle`, `trickle1s`: every reply (chat and /v1/models) one byte every 0.5 s / 1 s, one
  pair, `--timeout 3 --max-attempts 1`;
- `headers`: the status line and headers trickled forever, one byte every 0.5 s, the same;
- `endless`: a body that never ends, one pair, `--timeout 20 --max-attempts 1`;
- `500`: 500 to every request, `--depth 40` over 25 queries (1,000 pairs), defaults otherwise;
- `oneslot`: one request served at a time, 1 s each (abandoned ones served all the same),
  12 pairs, `--concurrency 8 --timeout 3`.

    python bench/wire_faults.py [--cases ok trickle headers endless 500 oneslot]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fakeserver import FakeServer, faults
from tests.grade_data import write_grade_files

CASES = ("ok", "trickle", "trickle1s", "headers", "endless", "500", "oneslot")


def _peak_rss_mib(pid: int, peak: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS"):
                    return max(peak, int(line.split()[1]) // 1024)
    except OSError:
        pass
    return peak


def run(server: FakeServer, folder: Path, shape: tuple[int, int], *extra: str) -> str:
    """Grade `shape` (queries, depth) against `server`; one line of what happened."""
    files = write_grade_files(folder, n_queries=shape[0], depth=shape[1])
    args = files.args("--base-url", server.base_url, "--store", folder / "s.db", "--quiet")
    args += ["--model", "fake-model", *extra]
    started = time.monotonic()
    child = subprocess.Popen(
        [sys.executable, "-m", "grader.cli.main", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    peak = 0
    while child.poll() is None:
        peak = _peak_rss_mib(child.pid, peak)
        time.sleep(0.05)
    _, err = child.communicate()
    last = err.strip().splitlines()[-1][:110] if err.strip() else ""
    counts = server.counts
    return (
        f"exit {child.returncode}, {time.monotonic() - started:.1f} s, peak RSS {peak} MiB, "
        f"requests {counts['requests']}, completed {counts['completed']}, hung up "
        f"{counts['hung_up']} | {last}"
    )


def case(name: str, server: FakeServer, folder: Path) -> str:
    one = ("--timeout", "3", "--max-attempts", "1")
    if name in ("trickle", "trickle1s", "headers"):
        interval = 1.0 if name == "trickle1s" else 0.5
        fault = faults.trickle_headers(interval) if name == "headers" else faults.trickle(interval)
        server.default_fault = server.models_fault = fault
        return run(server, folder, (1, 1), *one)
    if name == "endless":
        server.default_fault = server.models_fault = faults.endless_body()
        return run(server, folder, (1, 1), "--timeout", "20", "--max-attempts", "1")
    if name == "500":
        server.default_fault = faults.server_error(500)
        return run(server, folder, (25, 40))
    if name == "oneslot":
        server.slots, server.service_s = 1, 1.0
        return run(server, folder, (2, 6), "--concurrency", "8", "--timeout", "3")
    return run(server, folder, (1, 1), *one)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", choices=CASES, default=list(CASES))
    for name in parser.parse_args().cases:
        with FakeServer() as server, tempfile.TemporaryDirectory() as folder:
            print(f"{name}: {case(name, server, Path(folder))}", flush=True)


if __name__ == "__main__":
    main()
