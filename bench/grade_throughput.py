"""Grading throughput: relgrade against a bare loop of AsyncOpenAI calls on the same server.

The fake OpenAI-compatible server runs as a SUBPROCESS (its own GIL) answering after 100 ms.
In the same run, with concurrency 32 and 4,000 pairs each:

- the peer: a bare loop of `AsyncOpenAI.chat.completions.create` under a semaphore of 32,
  sending the same request bodies relgrade sends (`LLMJudge.build_request`);
- relgrade: `grade_pairs` with an `LLMJudge` and a fresh SQLite store (validation, keys,
  storage, call log included);
- an unchanged rerun of relgrade on the same store, which must send 0 requests.

Prints judgments/s, the ratio to the bare loop (goal >= 0.9), the ratio to the 320/s bound
(32 / 0.1 s), relgrade's CPU time per judgment (this process; the server's CPU is not counted)
and the requests of the rerun.

    python bench/grade_throughput.py [--pairs 4000] [--concurrency 32] [--latency-ms 100]
                                     [--rounds 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from openai import AsyncOpenAI  # noqa: E402

from grader.grading.pairs import Pair  # noqa: E402
from grader.grading.pipeline import StoreWriter, grade_pairs  # noqa: E402
from grader.judges.llm.judge import LLMJudge  # noqa: E402
from grader.models import Doc, Query  # noqa: E402
from grader.prompts import load_prompt  # noqa: E402
from grader.store.store import Store  # noqa: E402

API_KEY = "sk-bench-not-a-real-key"
MODEL = "gpt-4o-mini"


def start_server(latency_ms: float) -> tuple[subprocess.Popen[str], str]:
    """The fake server in its own process; returns it and its base URL."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.fakeserver", "--port", "0", "--latency-ms", str(latency_ms)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("FAKESERVER "):
        proc.kill()
        raise SystemExit(f"fake server did not start: {line!r}")
    return proc, line.split()[1]


def make_pairs(n: int) -> list[Pair]:
    """n distinct pairs with passage-sized texts."""
    words = [
        "cache",
        "eviction",
        "policy",
        "json",
        "config",
        "retry",
        "backoff",
        "sqlite",
        "wal",
        "index",
        "query",
    ]
    pairs = []
    for i in range(n):
        q = Query(query_id=f"q{i // 10}", text=f"how does {words[i % 11]} work in system {i // 10}")
        body = " ".join(words[(i + k) % 11] for k in range(60))
        pairs.append(Pair(q, Doc(doc_id=f"d{i}", text=f"passage {i}: {body}")))
    return pairs


def make_judge(base_url: str, writer: StoreWriter | None, concurrency: int) -> LLMJudge:
    return LLMJudge(
        model=MODEL,
        prompt=load_prompt("passage"),
        base_url=base_url,
        api_key=API_KEY,
        timeout=30.0,
        max_attempts=3,
        on_call=writer.log_call if writer is not None else None,
    )


async def bare_loop(
    base_url: str, bodies: list[dict[str, Any]], concurrency: int
) -> tuple[float, float]:
    """(seconds, CPU seconds) for the bare SDK loop to send every body (semaphore
    `concurrency`)."""
    client = AsyncOpenAI(base_url=base_url, api_key=API_KEY, max_retries=0, timeout=30.0)
    sem = asyncio.Semaphore(concurrency)

    async def one(body: dict[str, Any]) -> None:
        async with sem:
            await client.chat.completions.create(**body)

    cpu0, start = time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(b) for b in bodies))
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu0
    await client.close()
    return elapsed, cpu


async def relgrade_run(
    base_url: str, pairs: list[Pair], store_path: Path, concurrency: int
) -> tuple[float, float, int, int]:
    """(seconds, CPU seconds, requests sent, HTTP attempts logged) of one relgrade run."""
    store = Store(store_path)
    writer = StoreWriter(store)
    judge = make_judge(base_url, writer, concurrency)
    calls_before = len(store.calls())
    cpu0, t0 = time.process_time(), time.perf_counter()
    report = await grade_pairs(
        pairs, [judge], store=store, writer=writer, concurrency=concurrency, freeze_gc=True
    )
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    if report.failed or report.pending:
        raise SystemExit(f"relgrade run incomplete: {report.failed} failed, {report.pending} left")
    attempts = len(store.calls()) - calls_before
    store.close()
    return elapsed, cpu, report.requests, attempts


async def main_async(args: argparse.Namespace) -> None:
    proc, base_url = start_server(args.latency_ms)
    try:
        pairs = make_pairs(args.pairs)
        judge = make_judge(base_url, None, args.concurrency)
        bodies = [judge.build_request(p.query, p.doc) for p in pairs]
        # Warm up both paths (imports, connection pools) on a few pairs outside the timing.
        await bare_loop(base_url, bodies[:64], args.concurrency)
        with tempfile.TemporaryDirectory() as tmp:
            await relgrade_run(base_url, make_pairs(64)[:64], Path(tmp) / "warm.db", 32)

            # Rounds alternate the order (bare first, then relgrade first, ...) so that a
            # change in the machine's load does not favour one side.
            bare_s = bare_cpu = rel_s = rel_cpu = 0.0
            for r in range(args.rounds):
                store_path = Path(tmp) / f"bench{r}.db"
                for side in ("bare", "relgrade") if r % 2 == 0 else ("relgrade", "bare"):
                    if side == "bare":
                        seconds, cpu = await bare_loop(base_url, bodies, args.concurrency)
                        bare_s, bare_cpu = bare_s + seconds, bare_cpu + cpu
                    else:
                        seconds, cpu, sent, attempts = await relgrade_run(
                            base_url, pairs, store_path, args.concurrency
                        )
                        rel_s, rel_cpu = rel_s + seconds, rel_cpu + cpu
            _, _, rerun_sent, rerun_attempts = await relgrade_run(
                base_url, pairs, store_path, args.concurrency
            )
    finally:
        proc.terminate()
        proc.wait(timeout=10)

    n = args.pairs * args.rounds
    bound = args.concurrency / (args.latency_ms / 1000)
    bare_rate, rel_rate = n / bare_s, n / rel_s
    print(
        f"pairs {args.pairs} x {args.rounds} round(s), concurrency {args.concurrency}, "
        f"server latency {args.latency_ms:g} ms"
    )
    print(f"bare AsyncOpenAI loop:    {bare_rate:8.1f} req/s ({bare_s:.2f} s)")
    print(f"relgrade grade_pairs:     {rel_rate:8.1f} judgments/s ({rel_s:.2f} s)")
    print(f"ratio to bare loop:       {rel_rate / bare_rate:8.3f} (goal >= 0.9)")
    print(f"ratio to {bound:.0f}/s bound:    {rel_rate / bound:8.3f}")
    print(f"relgrade CPU / judgment:  {1000 * rel_cpu / n:8.2f} ms (this process)")
    print(f"bare loop CPU / request:  {1000 * bare_cpu / n:8.2f} ms")
    print(
        f"CPU ratio bare/relgrade:  {bare_cpu / rel_cpu:8.3f} (the throughput ratio when both are "
        "CPU-bound; steadier than wall time on a shared machine)"
    )
    print(
        f"requests sent: {sent} (HTTP attempts {attempts}); unchanged rerun: {rerun_sent} "
        f"(HTTP attempts {rerun_attempts})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds (ABBA...)")
    args = parser.parse_args()
    os.environ.pop("OPENAI_BASE_URL", None)
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
