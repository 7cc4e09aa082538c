"""Annotate speed: the time of one grade POST on a 100,000-row sample, at 0 and at 99,000 grades.

Builds (in a temp folder) a sample of 100,000 pairs and serves it twice with `AnnotateServer`:
over an empty grade log and over one holding 99,000 grades (written beforehand, as 99,000
appends would leave it). It then sends `--posts` grade POSTs to each over a real socket
(`http.client`, one connection per POST, as the page does), alternating between the two servers
so that disk and machine noise fall on both alike (after 50 untimed POSTs each), and prints per
POST the median, the 95th percentile and the maximum, the bytes of the log the POSTs read (0:
nothing is re-read), and the ratio of the medians at 99,000 and at 0 grades (goal: ~1, and
every POST under 50 ms). Every POST is fsynced, so its time is mostly the disk's. For scale it
also times one full read of the 99,000-grade log, which is what each POST cost when it re-read
the log.

    python bench/annotate_speed.py [--rows 100000] [--graded 99000] [--posts 300]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from calibration.spotcheck.annotate.gradelog import GradeLog
from calibration.spotcheck.annotate.server import AnnotateServer
from calibration.spotcheck.blind import BlindItem

SCALE = [(0, ""), (1, ""), (2, ""), (3, "")]
WARM_UP = 50  # POSTs to each server not timed: the disk is still writing the filled log back


def items(rows: int) -> list[BlindItem]:
    """`rows` pairs over rows/20 queries, each document a few hundred characters."""
    text = "a passage of ordinary length about the query's subject, " * 5
    return [BlindItem(f"q{i // 20}", f"d{i}", f"query {i // 20}", text) for i in range(rows)]


def fill(path: Path, pairs: list[BlindItem], n: int) -> None:
    """The log that n appends of grades for the first n pairs would leave."""
    with path.open("w", encoding="utf-8") as fh:
        for i, item in enumerate(pairs[:n]):
            rec = {
                "query_id": item.query_id,
                "doc_id": item.doc_id,
                "grade": i % 4,
                "annotator": "bench",
                "at": "2026-01-01T00:00:00.000+00:00",
            }
            fh.write(json.dumps(rec) + "\n")
        fh.flush()
        os.fsync(fh.fileno())  # so that the first POST's fsync does not write the whole file


def post(server: AnnotateServer, item: BlindItem, grade: int) -> float:
    """Seconds for one grade POST over a new connection."""
    host, port = server.address
    body = json.dumps({"query_id": item.query_id, "doc_id": item.doc_id, "grade": grade})
    headers = {"Content-Type": "application/json", "Host": f"127.0.0.1:{port}"}
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection(host, port, timeout=10)
    conn.request("POST", "/api/grade", body=body, headers=headers)
    reply = conn.getresponse()
    data = reply.read()
    conn.close()
    elapsed = time.perf_counter() - t0
    if reply.status != 200:
        raise SystemExit(f"POST failed: {reply.status} {data!r}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--graded", type=int, default=99_000)
    parser.add_argument("--posts", type=int, default=300)
    args = parser.parse_args()
    pairs = items(args.rows)
    sizes = (0, args.graded)
    with tempfile.TemporaryDirectory() as tmp:
        logs, servers = {}, {}
        for n in sizes:
            path = Path(tmp) / f"sample.{n}.grades.jsonl"
            fill(path, pairs, n)
            t0 = time.perf_counter()
            logs[n] = GradeLog(path, "bench")
            servers[n] = AnnotateServer(pairs, logs[n], SCALE)
            startup = time.perf_counter() - t0
            print(
                f"{n:>6} grades in the log ({path.stat().st_size / 1e6:.1f} MB): "
                f"server start-up (one read of the log) {startup * 1000:.0f} ms"
            )
            servers[n].start()
        read_before = {n: logs[n].bytes_read for n in sizes}
        times: dict[int, list[float]] = {n: [] for n in sizes}
        try:
            for k in range(WARM_UP + args.posts):
                item = pairs[-1 - k]  # pairs not graded yet, as an annotator moving on sends
                for n in sizes if k % 2 == 0 else sizes[::-1]:
                    elapsed = post(servers[n], item, k % 4) * 1000
                    if k >= WARM_UP:
                        times[n].append(elapsed)
        finally:
            for server in servers.values():
                server.stop()
        for n in sizes:
            ms = sorted(times[n])
            print(
                f"{n:>6} grades: per POST median {statistics.median(ms):.2f} ms, "
                f"p95 {ms[int(0.95 * (len(ms) - 1))]:.2f} ms, max {ms[-1]:.2f} ms "
                f"({args.posts} POSTs); bytes of the log read by the POSTs: "
                f"{logs[n].bytes_read - read_before[n]}"
            )
        t0 = time.perf_counter()
        GradeLog(logs[args.graded].path, "bench").read()
        full = (time.perf_counter() - t0) * 1000
        print(
            f"one full read of the {args.graded}-grade log: {full:.0f} ms (each POST's cost before)"
        )
    ratio = statistics.median(times[args.graded]) / statistics.median(times[0])
    print(f"ratio of the medians at {args.graded} / at 0 grades: {ratio:.2f} (goal ~1)")


if __name__ == "__main__":
    main()
