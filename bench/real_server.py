"""Real-server overhead: seconds per pair through relgrade against a bare AsyncOpenAI loop, on the
same llama.cpp server and the same pairs, and the share of requests that needed a re-ask.

The pairs are the examples' top `--depth` results per query (examples/passages). The bare loop
sends each pair's request body exactly as relgrade renders it (in `--mode`, the one the server
takes: llama.cpp's json_object + schema) with `chat.completions.create`, `--concurrency` at once,
and only checks that a reply came. relgrade runs `relgrade grade` (fresh store, same
concurrency) in this process. They alternate bare, relgrade, bare, relgrade over `--rounds`, so
the server's warm-up and the machine's noise fall on both. Printed: seconds per pair of each
(mean over rounds), the ratio bare / relgrade (1.0: no overhead; goal >= 0.95, since the model's
own time dominates), and from relgrade's call log the requests that were re-asks and the pairs
that needed one.

    python bench/real_server.py --base-url http://127.0.0.1:8080/v1 [--model M] [--depth 3]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import openai

from grader.cli.main import main as relgrade
from grader.io.docs import read_docs, read_queries
from grader.io.trec import read_run
from grader.judges.llm.attempts import SDK_ARGS
from grader.judges.llm.judge import LLMJudge

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "passages"


def bodies(base_url: str, model: str, depth: int, mode: str) -> list[dict[str, object]]:
    """The request body of each pair (top `depth` per query of the examples' run)."""
    queries = read_queries(EXAMPLES / "queries.tsv")
    docs = read_docs(EXAMPLES / "docs.tsv")
    judge = LLMJudge(model=model, prompt="passage-v1", base_url=base_url, output_mode=mode)  # type: ignore[arg-type]
    run = read_run(EXAMPLES / "run.txt")
    out = []
    for qid, ranked in run.groupby("query_id", sort=True):
        for doc_id in ranked.sort_values("rank")["doc_id"].head(depth):
            out.append(judge.build_request(queries[str(qid)], docs[str(doc_id)]))
    return out


async def bare_loop(base_url: str, bodies_: list[dict[str, object]], concurrency: int) -> float:
    """Seconds to send every body, `concurrency` at once, with a plain AsyncOpenAI client."""
    client = openai.AsyncOpenAI(base_url=base_url, api_key="no-key-needed", timeout=600)
    gate = asyncio.Semaphore(concurrency)

    async def one(body: dict[str, Any]) -> None:
        async with gate:
            extra = {k: v for k, v in body.items() if k not in SDK_ARGS}
            reply = await client.chat.completions.create(
                model=body["model"],
                messages=body["messages"],
                extra_body=extra,
            )
            assert reply.choices

    started = time.perf_counter()
    await asyncio.gather(*(one(b) for b in bodies_))
    elapsed = time.perf_counter() - started
    await client.close()
    return elapsed


def through_relgrade(base_url: str, model: str, depth: int, concurrency: int) -> tuple[float, Path]:
    """Seconds of one `relgrade grade` of the pairs (fresh store), and the store."""
    folder = Path(tempfile.mkdtemp(prefix="relgrade-bench-"))
    db = folder / "store.db"
    args = [
        "grade",
        "--queries",
        str(EXAMPLES / "queries.tsv"),
        "--docs",
        str(EXAMPLES / "docs.tsv"),
        "--run",
        str(EXAMPLES / "run.txt"),
        "--depth",
        str(depth),
        "--base-url",
        base_url,
        "--model",
        model,
        "--concurrency",
        str(concurrency),
        "--timeout",
        "600",
        "--store",
        str(db),
        "--quiet",
    ]
    started = time.perf_counter()
    relgrade(args)
    return time.perf_counter() - started, db


def reasks(db: Path) -> tuple[int, int, int, int]:
    """(re-asked requests, requests, pairs that needed a re-ask, pairs) from the call log: a
    request follows an invalid reply when an earlier attempt of its pair was `invalid`."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT key, attempt, status FROM calls ORDER BY key, attempt")
        by_key: dict[object, list[str]] = {}
        for key, _, outcome in rows:
            by_key.setdefault(key, []).append(outcome)
    reasked = sum(
        len(outcomes) - outcomes.index("invalid") - 1
        for outcomes in by_key.values()
        if "invalid" in outcomes
    )
    requests = sum(len(o) for o in by_key.values())
    pairs_reasked = sum(1 for o in by_key.values() if "invalid" in o)
    return reasked, requests, pairs_reasked, len(by_key)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", help="default: the first model the server lists")
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--mode", default="json_object_schema")
    args = parser.parse_args()
    model = args.model
    if model is None:
        listed = openai.OpenAI(base_url=args.base_url, api_key="no-key-needed").models.list()
        model = listed.data[0].id
    work = bodies(args.base_url, model, args.depth, args.mode)
    pairs = len(work)
    bare: list[float] = []
    through: list[float] = []
    stores: list[Path] = []
    for _ in range(args.rounds):
        bare.append(asyncio.run(bare_loop(args.base_url, work, args.concurrency)) / pairs)
        seconds, db = through_relgrade(args.base_url, model, args.depth, args.concurrency)
        through.append(seconds / pairs)
        stores.append(db)
    reasked, requests, pairs_reasked, judged = map(
        sum, zip(*(reasks(s) for s in stores), strict=True)
    )
    b, r = statistics.mean(bare), statistics.mean(through)
    print(f"pairs: {pairs} x {args.rounds} rounds, concurrency {args.concurrency}, model {model}")
    print(f"bare AsyncOpenAI loop: {b:.2f} s/pair (rounds: {', '.join(f'{x:.2f}' for x in bare)})")
    print(
        f"relgrade grade:        {r:.2f} s/pair (rounds: {', '.join(f'{x:.2f}' for x in through)})"
    )
    print(f"ratio bare / relgrade: {b / r:.3f} (goal >= 0.95)")
    print(
        f"re-asks: {reasked} of {requests} requests ({reasked / max(requests, 1):.1%}); "
        f"{pairs_reasked} of {judged} pairs needed one ({pairs_reasked / max(judged, 1):.1%})"
    )


if __name__ == "__main__":
    main()
