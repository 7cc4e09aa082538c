"""`relgrade batch run --engine ray` against live `grade` on the same fake server: --pairs pairs
(default 2,000) exported, answered through Ray Data on a local cluster (`ray.init` of this
machine, or --nodes 2: a head and a second node, `ray.cluster_utils.Cluster`) and imported,
against `relgrade grade` of the same pairs into another store. Prints pairs per second each way
(the Ray side: run + import, Ray's start included), their ratio (goal >= 0.8), and the share of
requests paid twice (the requests the actors logged, over the lines exported, less one). The
server runs as its own process (tests/fakeserver.py, --latency-ms per reply). Needs the ray
extra.

    python bench/batch_ray.py                       # 2,000 pairs
    python bench/batch_ray.py --pairs 20000 --nodes 2
    python bench/batch_ray.py --die-once     # one actor dies after answering its first block
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader.batch.engines.ray_run import DIE_ONCE_ENV  # noqa: E402
from tests.grade_data import write_grade_files  # noqa: E402


def _server(latency_ms: int) -> tuple[subprocess.Popen[str], str]:
    argv = [sys.executable, "-m", "tests.fakeserver", "--port", "0"]
    proc = subprocess.Popen(
        [*argv, "--latency-ms", str(latency_ms)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    match = re.search(r"FAKESERVER (\S+)", line)
    if match is None:
        proc.kill()
        raise SystemExit(f"the fake server did not start: {line!r}")
    return proc, match.group(1)


def _relgrade(*args: str | Path) -> tuple[float, str]:
    """Run `relgrade ARGS`; (seconds, stderr). Exits when it fails."""
    started = time.monotonic()
    argv = [sys.executable, "-m", "grader.cli.main", *map(str, args)]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(f"relgrade {args[0]} exited {done.returncode}: {done.stderr[-2000:]}")
    return time.monotonic() - started, done.stderr


def _sent(stderr: str) -> int:
    """The requests `batch run` says its actors sent (their logs, retries included)."""
    match = re.search(r"([\d,]+) requests sent", stderr)
    return int(match.group(1).replace(",", "")) if match else -1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--depth", type=int, default=10)
    parser.add_argument("--latency-ms", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--nodes", type=int, choices=[1, 2], default=1)
    parser.add_argument(
        "--die-once", action="store_true", help="one actor dies after its first block"
    )
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="batch-ray-"))
    files = write_grade_files(tmp, n_queries=args.pairs // args.depth, depth=args.depth)
    pairs = (args.pairs // args.depth) * args.depth
    server, url = _server(args.latency_ms)
    cluster = None
    try:
        common: list[str | Path] = ["--queries", files.queries, "--docs", files.docs]
        common += ["--run", files.run]
        common += ["--depth", str(args.depth), "--model", "fake-model"]
        live_s, _ = _relgrade("grade", *common, "--store", tmp / "live.db", "--base-url", url,
                              "--concurrency", str(args.concurrency), "--quiet")  # fmt: skip
        db, req, res = tmp / "batch.db", tmp / "req", tmp / "res"
        _relgrade("batch", "export", *common, "--store", db, "--out-dir", req, "--quiet")
        lines = sum(1 for p in req.glob("*.jsonl") for _ in p.open())
        if args.die_once:  # before the cluster starts: its workers inherit it
            os.environ[DIE_ONCE_ENV] = str(tmp / "died")
        address: list[str] = []
        if args.nodes == 2:
            from ray.cluster_utils import Cluster

            cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
            cluster.add_node(num_cpus=1)
            cluster.wait_for_nodes()
            address = ["--ray-address", cluster.address]
        run_s, err = _relgrade("batch", "run", "--engine", "ray", "--store", db, req,
                               "--base-url", url, "--out-dir", res, "--concurrency",
                               str(args.concurrency), "--quiet", *address)  # fmt: skip
        import_s, _ = _relgrade("batch", "import", "--store", db, res, "--quiet")
        sent = _sent(err)
    finally:
        server.terminate()
        if cluster is not None:
            cluster.shutdown()  # type: ignore[no-untyped-call]
    twice = [x for x in err.splitlines() if "more than once" in x]
    live_rate, ray_rate = pairs / live_s, pairs / (run_s + import_s)
    print(f"{pairs:,} pairs ({lines:,} request lines), fake server {args.latency_ms} ms a reply, "
          f"--concurrency {args.concurrency}, Ray nodes: {args.nodes}")  # fmt: skip
    print(f"live grade:            {live_s:7.1f} s  {live_rate:8.1f} pairs/s")
    print(f"batch run (ray):       {run_s:7.1f} s  (Ray's start included)")
    print(f"batch import:          {import_s:7.1f} s")
    print(f"run + import:          {run_s + import_s:7.1f} s  {ray_rate:8.1f} pairs/s")
    print(f"ratio ray/live:        {ray_rate / live_rate:7.2f}  (goal >= 0.8)")
    print(f"paid twice:            {sent - lines:,} of {lines:,} ({(sent - lines) / lines:.1%})")
    print(f"batch run said:        {twice[0] if twice else '-'}")


if __name__ == "__main__":
    main()
