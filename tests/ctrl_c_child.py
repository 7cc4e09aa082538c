"""A grading run in a process of its own, for the Ctrl-C tests (tests/test_pipeline_ctrl_c.py):
the test signals this child, never its own process.

`python -m tests.ctrl_c_child MODE STORE N_PAIRS`: grades N_PAIRS pairs with two workers and the
pipeline's Ctrl-C handler. Each judge call prints `call DOC_ID`; once two calls are in flight it
prints `in flight`, and the calls stay there: in mode `finish` until SIGUSR1 comes (the test
sends it after SIGINT; signals are handled in the order they arrive), in mode `abandon` for ever
(the grace period abandons them). At the end it prints the report as one JSON line.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

from grader.grading.pairs import Pair
from grader.grading.pipeline import grade_pairs
from grader.models import Doc, Judgment, Query
from grader.store.store import Store

IN_FLIGHT = 2


class HeldJudge:
    """A judge whose calls wait on `release` (None: for ever) before answering grade 2."""

    judge_id = "scripted:held"

    def __init__(self, release: asyncio.Event | None) -> None:
        self.release = release
        self.calls: list[str] = []

    def fingerprint(self) -> dict[str, Any]:
        return {"judge": self.judge_id}

    async def judge(self, query: Query, doc: Doc, *, key: str) -> Judgment:
        self.calls.append(doc.doc_id)
        print(f"call {doc.doc_id}", flush=True)
        if len(self.calls) == IN_FLIGHT:
            print("in flight", flush=True)
        if self.release is None:
            await asyncio.Event().wait()  # never set: only the grace period ends this call
        else:
            await self.release.wait()
        return Judgment(
            query_id=query.query_id,
            doc_id=doc.doc_id,
            grade=2,
            status="ok",
            judge=self.judge_id,
            key=key,
            attempts=1,
        )


async def _main(mode: str, store_path: Path, n_pairs: int) -> dict[str, Any]:
    release = asyncio.Event() if mode == "finish" else None
    if release is not None:
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, release.set)
    judge = HeldJudge(release)
    pairs = [
        Pair(Query(query_id=f"q{i % 3}", text=f"query {i % 3}"), Doc(doc_id=f"d{i}", text=f"d{i}"))
        for i in range(n_pairs)
    ]
    with Store(store_path) as store:
        report = await grade_pairs(
            pairs, [judge], store=store, concurrency=IN_FLIGHT, grace_s=0.2, handle_sigint=True
        )
        stored = store.count()
    return {
        "interrupted": report.interrupted,
        "graded": report.graded,
        "pending": report.pending,
        "calls": judge.calls,
        "stored": stored,
    }


if __name__ == "__main__":
    result = asyncio.run(_main(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])))
    print(json.dumps(result), flush=True)
