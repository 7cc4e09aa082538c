"""The call log has one record type: the LLM judge's `CallRecord`s land in the store column by
column, through the same StoreWriter the grading pipeline uses."""

from __future__ import annotations

import typing
from collections.abc import Callable
from pathlib import Path

from grader.judges.llm.judge import LLMJudge
from grader.judges.llm.results import JudgmentRecorder
from grader.judges.llm.retry import RetryPolicy
from grader.models import CallRecord, Doc, Query
from grader.prompts import load_prompt
from grader.store.store import Store
from grader.store.writer import StoreWriter
from tests.fakeserver import FakeServer, faults

KEY = "sk-test-abcdef0123456789SECRET"


def test_the_judge_and_the_store_share_one_call_record_type() -> None:
    on_call = typing.get_type_hints(JudgmentRecorder)["on_call"]
    assert on_call == Callable[[CallRecord], None] | None


async def test_every_attempt_of_the_judge_lands_in_the_call_log(
    fake_server: FakeServer, tmp_path: Path
) -> None:
    with Store(tmp_path / "s.db", secrets=[KEY]) as store:
        writer = StoreWriter(store)
        seen: list[CallRecord] = []

        def on_call(record: CallRecord) -> None:
            seen.append(record)
            writer.log_call(record)

        async def no_wait(seconds: float) -> None:
            return None

        judge = LLMJudge(
            model="gpt-4o-mini",
            prompt=load_prompt("passage-v1"),
            base_url=fake_server.base_url,
            api_key=KEY,
            policy=RetryPolicy(max_attempts=3, max_reasks=1, base_delay=0.01, max_delay=0.01),
            on_call=on_call,
            timeout=5.0,
            sleep=no_wait,
        )
        fake_server.enqueue(faults.error(500, f"upstream rejected key {KEY}"))
        j = await judge.judge(
            Query(query_id="q1", text="how do cats purr"),
            Doc(doc_id="d1", text="Cats purr by vibrating the larynx."),
            key="sha256:k1",
        )
        writer.flush()
        rows = store.calls("sha256:k1")
    assert j.status == "ok" and len(seen) == 2
    assert [r["status"] for r in rows] == [r.outcome for r in seen] == ["retry", "ok"]
    assert [r["attempt"] for r in rows] == [r.attempt for r in seen]
    assert [r["http_status"] for r in rows] == [r.http_status for r in seen] == [500, 200]
    assert rows[0]["error_type"] == seen[0].error_type is not None
    assert KEY not in (rows[0]["error_message"] or "") and "upstream" in rows[0]["error_message"]
    for row, record in zip(rows, seen, strict=True):
        assert row["latency_ms"] == record.latency_ms
        assert row["prompt_tokens"] == record.usage.prompt_tokens
        assert row["completion_tokens"] == record.usage.completion_tokens
        assert row["cached_tokens"] == record.usage.cached_tokens
    assert rows[1]["prompt_tokens"] > 0
