"""Batch files for any engine at scale: `batch export` and `batch import` of --pairs pairs
(default 1,000,000; lexical-size documents, 10 per query), lines per second each way and memory.

Export goes through `export_requests` (the library `relgrade batch export` calls) into a fresh
store; the results file is then written as vLLM run-batch would (each body answered by the fake
server's reply function, no HTTP, not timed); import goes through `Importer` (what `relgrade
batch import` runs). The export's time includes making the pairs: they come from a generator
(memory stays flat) that builds each pair's validated `Doc` and, once per query, its `Query`
(~2.5 us a pair on an idle core, about what reading them from files costs the command). Memory:
resident set size sampled at each chunk (the import's workers hold one ~4 MB range each at a
time). Goal: both ways >= 12,000 lines/s, peak RSS <= 400 MB. Lines per CPU second (this
process's CPU time and its children's once ended: the import's workers) are printed too: on a
shared machine they move less.

    python bench/batch_files.py                 # 1,000,000 pairs (several minutes)
    python bench/batch_files.py --pairs 50000   # quick
    python bench/batch_files.py --export-only   # the export alone
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader.batch.adapter import JobJudges, LLMBatchJudge, job_config
from grader.batch.files.export_files import LineProgress, export_requests
from grader.batch.files.import_files import Importer
from grader.judges.llm.judge import LLMJudge
from grader.models import Doc, Query
from grader.prompts import PromptSpec, load_prompt
from grader.store.store import Store
from tests import fake_engine
from tests.fakeserver import FakeServer

WORDS = [
    "cache",
    "eviction",
    "json",
    "config",
    "parser",
    "retry",
    "backoff",
    "sqlite",
    "wal",
    "mode",
    "index",
    "token",
    "query",
    "document",
    "passage",
    "ranking",
    "score",
    "batch",
    "engine",
    "request",
    "result",
    "store",
    "lease",
    "journal",
]


def cpu_s() -> float:
    """CPU seconds of this process and of its children that have ended (import workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def rss_mb(pid: int | str = "self") -> float:
    """Resident set size of a process (this one by default) now, in MB (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6
    except OSError:
        return 0.0


class Memory:
    """RSS at each progress call: at 10% of the work and at the end."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.at_tenth: float | None = None
        self.last = 0.0
        self.peak = 0.0

    def __call__(self, p: LineProgress) -> None:
        now = rss_mb()
        self.peak = max(self.peak, now)
        self.last = now
        done = p.fraction if p.fraction is not None else p.lines / self.total
        if self.at_tenth is None and done >= 0.1:
            self.at_tenth = now


def pairs(n: int, seed: int = 1) -> Iterator[tuple[Query, Doc]]:
    """`n` pairs, 10 per query, every document text distinct (~420 characters). Texts are
    drawn from a pool of word sequences made once, so making them costs little of the time
    measured (drawing 60 random words per pair took 40 us, as long as exporting a pair)."""
    rng = random.Random(seed)
    bodies = [" ".join(rng.choices(WORDS, k=60)) for _ in range(997)]
    heads = [" ".join(rng.choices(WORDS, k=5)) for _ in range(101)]
    query = Query(query_id="q0", text=f"{heads[0]} 0")
    for i in range(n):
        q = i // 10
        if i % 10 == 0:  # a query's text is the same in each of its pairs
            query = Query(query_id=f"q{q}", text=f"{heads[q % 101]} {q}")
        text = f"{bodies[i % 997]} {i}"
        yield query, Doc(doc_id=f"d{i}", text=text, title=f"doc {i}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--dir", help="work folder (default: a temporary one)")
    parser.add_argument(
        "--workers", type=int, help="import worker processes (default: batch import's choice)"
    )
    parser.add_argument("--export-only", action="store_true", help="time the export alone")
    args = parser.parse_args()
    work = Path(args.dir or tempfile.mkdtemp(prefix="relgrade-batch-files-"))
    work.mkdir(exist_ok=True)
    spec = load_prompt("passage")

    def make_judge(model: str, prompt: PromptSpec) -> LLMJudge:
        return LLMJudge(model=model, prompt=prompt, base_url="http://127.0.0.1:9/v1")

    judge = LLMBatchJudge(make_judge("fake-model", spec))
    start_rss = rss_mb()
    mem = Memory(args.pairs)
    with Store(work / "bench.db") as store:
        t0, c0 = time.perf_counter(), cpu_s()
        summary = export_requests(
            store,
            judge,
            job_config(judge, "passage"),
            pairs(args.pairs),
            work / "requests",
            total=args.pairs,
            progress=mem,
            freeze_gc=True,  # as `relgrade batch export` runs it
        )
        export_s, export_cpu = time.perf_counter() - t0, cpu_s() - c0
    size = sum(p.stat().st_size for p in summary.files) / 1e6
    print(
        f"export: {summary.lines:,} lines in {len(summary.files)} files ({size:,.0f} MB) in "
        f"{export_s:.1f} s: {summary.lines / export_s:,.0f} lines/s "
        f"({summary.lines / export_cpu:,.0f} per CPU second); RSS {start_rss:.0f} MB "
        f"at start, {mem.at_tenth or 0:.0f} MB at 10%, {mem.last:.0f} MB at the end, "
        f"peak {mem.peak:.0f} MB"
    )
    if args.export_only:
        print(f"work folder: {work}")
        return
    server = FakeServer()
    results = []
    for path in summary.files:
        target = work / f"{path.stem}.results.jsonl"
        fake_engine.run_batch(path, target, lambda body: (200, server.completion_for(body), None))
        results.append(target)
    before = rss_mb()
    mem = Memory(summary.lines)
    with Store(work / "bench.db") as store:
        judges = JobJudges(make_judge)
        with Importer(
            store, judges.for_job, progress=mem, workers=args.workers, freeze_gc=True
        ) as importer:
            t0, c0 = time.perf_counter(), cpu_s()
            done = importer.run(results)
            import_s, import_cpu = time.perf_counter() - t0, cpu_s() - c0
        ok = store.count(status="ok")
    print(
        f"import: {done.lines:,} lines ({done.ok:,} ok, {done.failed:,} failed) in "
        f"{import_s:.1f} s: {done.lines / import_s:,.0f} lines/s ({done.lines / import_cpu:,.0f} "
        f"per CPU second, workers included); RSS {before:.0f} MB at "
        f"start, {mem.at_tenth or 0:.0f} MB at 10%, {mem.last:.0f} MB at the end, peak "
        f"{mem.peak:.0f} MB; store holds {ok:,} ok"
    )
    print(f"work folder: {work}")


if __name__ == "__main__":
    main()
