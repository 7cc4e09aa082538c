"""Two gradings in one process, even in one event loop, do not disturb each other.

The library has no process-wide side effects unless asked: no SIGINT handler, no gc.freeze, no
bar of its own; progress goes to each run's own callback. Run through the real openai SDK
against the fake OpenAI-compatible server, each run with its own judge, store and writer.
"""

from __future__ import annotations

import asyncio
import gc
import signal
from pathlib import Path
from typing import Any

import pytest

from grader.grading.events import ProgressEvent
from grader.grading.pairs import Pair
from grader.grading.pipeline import GradingReport, grade_pairs
from grader.judges.llm.judge import LLMJudge
from grader.models import Doc, Query
from grader.prompts import load_prompt
from grader.store.store import Store
from grader.store.writer import StoreWriter
from tests.fakeserver import FakeServer, default_grade
from tests.helpers.judgments import stored_judgments

KEY = "sk-test-concurrent-0123456789"


def _pairs(run: str, n: int) -> list[Pair]:
    return [
        Pair(
            Query(query_id=f"{run}q{i % 3}", text=f"{run} question number {i % 3}"),
            Doc(doc_id=f"{run}d{i}", text=f"passage {i} written only for run {run}"),
        )
        for i in range(n)
    ]


class _Run:
    """One grading: its pairs, judge, store and the progress events it saw."""

    def __init__(self, name: str, server: FakeServer, tmp_path: Path, n: int) -> None:
        self.name = name
        self.pairs = _pairs(name, n)
        self.store = Store(tmp_path / f"{name}.db")
        self.writer = StoreWriter(self.store)
        self.judge = LLMJudge(
            model=f"model-{name}",
            prompt=load_prompt("passage-v1"),
            base_url=server.base_url,
            api_key=KEY,
            on_call=self.writer.log_call,
        )
        self.events: list[ProgressEvent] = []
        self.during: list[tuple[Any, int]] = []  # (SIGINT handler, gc freeze count) per event

    def expected_grades(self) -> dict[tuple[str, str], int]:
        """What the fake server answers for each of this run's own requests."""
        return {
            (p.query.query_id, p.doc.doc_id): default_grade(
                self.judge.build_request(p.query, p.doc)
            )
            for p in self.pairs
        }

    async def grade(self, order: list[str], **options: Any) -> GradingReport:
        def on_progress(event: ProgressEvent) -> None:
            self.events.append(event)
            order.append(self.name)
            self.during.append((signal.getsignal(signal.SIGINT), gc.get_freeze_count()))

        return await grade_pairs(
            self.pairs,
            [self.judge],
            store=self.store,
            writer=self.writer,
            concurrency=3,
            progress=on_progress,
            **options,
        )

    async def close(self) -> None:
        await self.judge.aclose()
        self.store.close()


async def test_two_gradings_in_one_event_loop_keep_to_their_own_results(
    fake_server: FakeServer, tmp_path: Path
) -> None:
    fake_server.latency_ms = 10.0  # calls stay in flight, so the two runs interleave
    sigint_before = signal.getsignal(signal.SIGINT)
    assert gc.get_freeze_count() == 0
    a, b = _Run("a", fake_server, tmp_path, 9), _Run("b", fake_server, tmp_path, 7)
    order: list[str] = []
    try:
        report_a, report_b = await asyncio.gather(a.grade(order), b.grade(order))
        for run, report in ((a, report_a), (b, report_b)):
            n = len(run.pairs)
            assert (report.graded, report.failed, report.pending, report.requests) == (n, 0, 0, n)
            got = {(j.query_id, j.doc_id): j.grade for j in report.judgments}
            assert got == run.expected_grades()
            stored = list(stored_judgments(run.store))
            assert len(stored) == n
            assert {(j.query_id, j.doc_id): j.grade for j in stored} == got
            assert {j.judge for j in stored} == {f"openai:model-{run.name}"}
            assert sorted(run.store.queries()) == sorted({p.query.query_id for p in run.pairs})
            calls = run.store.calls()
            assert len(calls) == n and {c["key"] for c in calls} == {j.key for j in stored}
            # Its own progress: a start event, then one per call, ending with every pair done.
            # (model-a and model-b have no price: their spend is unknown, never $0)
            assert run.events[0] == ProgressEvent(total=n, cached=0, cost_known=False)
            assert run.events[-1] == ProgressEvent(total=n, cached=0, done=n, cost_known=False)
            assert [e.done for e in run.events] == list(range(n + 1))
            # While running, no SIGINT handler and no frozen gc, in either run.
            assert run.during and all(
                handler is sigint_before and frozen == 0 for handler, frozen in run.during
            )
        assert fake_server.counts["requests"] == len(a.pairs) + len(b.pairs)
        # They really ran at the same time: each run reported progress between the other's.
        assert order.index("b") < len(order) - 1 - order[::-1].index("a")
        assert order.index("a") < len(order) - 1 - order[::-1].index("b")
    finally:
        await a.close()
        await b.close()
    assert signal.getsignal(signal.SIGINT) is sigint_before
    assert gc.get_freeze_count() == 0


@pytest.mark.slow
async def test_the_cli_opts_in_to_sigint_handling_and_gc_freeze_for_one_run(
    fake_server: FakeServer, tmp_path: Path
) -> None:
    sigint_before = signal.getsignal(signal.SIGINT)
    run = _Run("c", fake_server, tmp_path, 4)
    try:
        report = await run.grade([], handle_sigint=True, freeze_gc=True)
    finally:
        await run.close()
    assert report.graded == 4
    assert run.during and all(
        handler is not sigint_before and frozen > 0 for handler, frozen in run.during
    )
    assert signal.getsignal(signal.SIGINT) is sigint_before  # removed when the run ended
    assert gc.get_freeze_count() == 0
