"""The Python API's overhead: `relgrade.evaluate` against `relgrade evaluate` in one process.

Generates (seeded, into a temp folder, as bench/metrics_speed.py does) a run of 10,000 queries x
1,000 ranked docs and qrels with ~50 judged docs per query, then times, alternating, in this
process:

- the command: `grader.cli.main.main(["evaluate", QRELS, RUN, -m ..., "--format", "json"])`
  (stdout captured): reading, ranking, scoring, the records and their JSON;
- the API on the same files: `relgrade.evaluate(QRELS, RUN, measures)`, a DataFrame;
- for information, the API on frames already in memory (the run read by `relgrade.read_run`
  beforehand, outside the timing): `relgrade.evaluate(qrels_frame, run_frame, measures)`.

Prints the best of --repeat N runs of each (the command and the API on files alternate which
goes first), the ratio API / command on the same files (goal <= 1.1) and the ratio of the
medians (steadier on a loaded machine), and checks that both give the same means.

    python bench/api_overhead.py [--queries 10000] [--docs 1000] [--judged 50] [--repeat 3]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# bench/, this script's folder, is on the path
from metrics_speed import MEASURES, generate  # noqa: E402

import relgrade as rg  # noqa: E402
from grader.cli.main import main as relgrade_main  # noqa: E402


def command(qrels: Path, run: Path) -> list[dict[str, Any]]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = relgrade_main(
            ["evaluate", str(qrels), str(run), "-m", *MEASURES, "--format", "json"]
        )
    assert code == 0
    records: list[dict[str, Any]] = json.loads(out.getvalue())
    return records


def timed(fn: Callable[[], Any], times: list[float]) -> Any:
    start = time.perf_counter()
    result = fn()
    times.append(time.perf_counter() - start)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10_000)
    parser.add_argument("--docs", type=int, default=1_000)
    parser.add_argument("--judged", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="relgrade-api-bench-") as tmp:
        folder = Path(tmp)
        generate(folder, args.queries, args.docs, args.judged, args.seed)
        qrels, run = folder / "qrels.txt", folder / "run.txt"
        qrels_frame, run_frame = rg.read_qrels(qrels), rg.read_run(run)
        cli_times: list[float] = []
        api_times: list[float] = []
        frame_times: list[float] = []
        records: list[dict[str, Any]] = []
        frame = frame_in = None
        for round_ in range(args.repeat):
            # Which side goes first alternates, so neither always follows the other's garbage.
            if round_ % 2 == 0:
                records = timed(lambda: command(qrels, run), cli_times)
            frame = timed(lambda: rg.evaluate(qrels, run, MEASURES), api_times)
            if round_ % 2 == 1:
                records = timed(lambda: command(qrels, run), cli_times)
            frame_in = timed(lambda: rg.evaluate(qrels_frame, run_frame, MEASURES), frame_times)
    assert frame is not None and frame_in is not None
    means = {r["measure"]: r["value"] for r in records}
    for got in (frame, frame_in):
        for measure, value in zip(got.measure, got.value, strict=True):
            assert abs(means[measure] - value) <= 1e-12, (measure, means[measure], value)
    cli, api, frames = min(cli_times), min(api_times), min(frame_times)
    print(f"{args.queries:,} queries x {args.docs:,} docs, measures {', '.join(MEASURES)}")
    print(f"relgrade evaluate (in process, --format json): {cli:.3f} s (best of {args.repeat})")
    print(f"relgrade.evaluate on the same files:          {api:.3f} s")
    print(f"relgrade.evaluate on frames in memory:        {frames:.3f} s (for information)")
    print(f"ratio API / command, same files: {api / cli:.3f} (goal <= 1.1)")
    median = statistics.median(api_times) / statistics.median(cli_times)
    print(f"ratio of the medians: {median:.3f}")
    rounds = zip(cli_times, api_times, frame_times, strict=True)
    print(
        "rounds (command, API, API on frames): "
        + "; ".join(f"{c:.2f} {a:.2f} {f:.2f}" for c, a, f in rounds)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
