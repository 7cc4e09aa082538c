"""The judgment recorder works from a frozen config, not from the judge that owns it.

`grader.judges.llm.results` must not import the judge module (not even under TYPE_CHECKING):
the recorder is built, and tested here, from its settings alone.
"""

from __future__ import annotations

import ast
import dataclasses
import time
from pathlib import Path

import openai
import pytest

from grader.cost import PriceTable
from grader.judges.llm import results
from grader.judges.llm.judge import LLMJudge
from grader.judges.llm.replies import GradeReply, InvalidReply
from grader.judges.llm.results import CallState, JudgmentRecorder
from grader.models import CallRecord, Doc, Query, Usage
from grader.prompts import load_prompt

SECRET = "sk-recorder-test-0123456789"
QUERY = Query(query_id="q1", text="how do cats purr")
DOC = Doc(doc_id="d1", text="Cats purr by vibrating the larynx.")
SPEC = load_prompt("passage-v1")
PROMPT = SPEC.ref()


def _state(**kw: object) -> CallState:
    fields: dict[str, object] = {
        "query": QUERY,
        "doc": DOC,
        "key": "sha256:k1",
        "mode": "json_schema",
        "messages": [],
        "truncated": False,
    }
    fields.update(kw)
    return CallState(**fields)  # type: ignore[arg-type]


def _reply(usage: Usage) -> GradeReply:
    return GradeReply(
        grade=2,
        reason="relevant",
        distribution=None,
        expected_grade=None,
        confidence=None,
        usage=usage,
        raw='{"grade": 2}',
        finish_reason="stop",
    )


def test_results_module_does_not_import_the_judge_module() -> None:
    tree = ast.parse(Path(results.__file__).read_text(encoding="utf-8"))
    imported: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
            imported.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    assert not any(name.startswith("grader.judges.llm.judge") for name in imported), imported
    assert "LLMJudge" not in Path(results.__file__).read_text(encoding="utf-8")


def test_config_is_frozen() -> None:
    config = JudgmentRecorder(judge_id="openai:m", model="m", prompt=SPEC)
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.model = "other"  # type: ignore[misc]


def test_ok_judgment_carries_the_configs_identity_and_price() -> None:
    prices = PriceTable.from_files()
    usage = Usage(prompt_tokens=1000, completion_tokens=100)
    config = JudgmentRecorder(judge_id="openai:gpt-4o-mini", model="gpt-4o-mini", prompt=SPEC)
    priced = dataclasses.replace(config, prices=prices)
    state = _state(attempts=1, usage=usage)
    judgment = priced.ok(state, _reply(usage), time.perf_counter())
    assert (judgment.status, judgment.grade, judgment.judge) == ("ok", 2, "openai:gpt-4o-mini")
    assert judgment.prompt == PROMPT and judgment.key == "sha256:k1"
    assert judgment.cost == prices.cost("gpt-4o-mini", usage)
    assert judgment.cost is not None and judgment.cost > 0
    batch = priced.ok(state, _reply(usage), None)  # no start: a batch line
    assert batch.latency_ms is None
    assert batch.cost == pytest.approx(judgment.cost * prices.batch_discount)
    # Without a price table the cost is unknown, never 0.
    assert config.ok(state, _reply(usage), time.perf_counter()).cost is None


def test_failed_judgment_and_call_records_redact_the_configs_secrets() -> None:
    calls: list[CallRecord] = []
    recorder = JudgmentRecorder(
        judge_id="openai:m", model="m", prompt=SPEC, on_call=calls.append, secrets=(SECRET,)
    )
    state = _state(attempts=2, last_raw=f"echo {SECRET}")
    exc = InvalidReply("out_of_range", f"grade 7 from key {SECRET}", raw=f"raw {SECRET}")
    failed = recorder.failed(state, "InvalidReply", recorder.message(exc), time.perf_counter())
    assert failed.status == "failed" and failed.grade is None
    assert failed.error is not None
    assert failed.error.message == "out_of_range: grade 7 from key [redacted]"
    assert failed.error.raw_reply == "echo [redacted]"
    recorder.record(state, "invalid", time.perf_counter(), Usage(), exc=exc, status=200)
    assert len(calls) == 1
    record = calls[0]
    assert (record.judge, record.model, record.attempt, record.outcome) == (
        "openai:m",
        "m",
        2,
        "invalid",
    )
    assert record.error_type == "InvalidReply.out_of_range"
    assert record.error_message is not None and SECRET not in record.error_message


def test_llm_judge_builds_its_recorder_from_its_own_settings() -> None:
    calls: list[CallRecord] = []
    prices = PriceTable.from_files()
    client = openai.AsyncOpenAI(api_key=SECRET, base_url="http://127.0.0.1:9/v1")
    judge = LLMJudge(
        model="gpt-4o-mini",
        prompt=load_prompt("passage-v1"),
        client=client,
        prices=prices,
        on_call=calls.append,
    )
    config = judge._recorder
    assert config.judge_id == judge.judge_id and config.model == "gpt-4o-mini"
    assert config.prompt is judge.prompt and config.ref == judge.prompt.ref()
    assert config.prices is prices and config.on_call == calls.append
    assert set(config.secrets) == {SECRET}
