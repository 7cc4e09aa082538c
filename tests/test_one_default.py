"""One default per setting: the command line, the LLM judge built in Python, the Batch API
client and `relgrade.grade` start from the same values (grader/defaults.py)."""

from __future__ import annotations

import inspect

import relgrade as rg
from grader import defaults
from grader.batch.api.client import BatchClient
from grader.cli.main import build_parser
from grader.judges.llm.judge import LLMJudge

URL = "http://127.0.0.1:9/v1"  # never contacted: building a judge sends nothing


def _grade_flags() -> dict[str, object]:
    args = build_parser("grade").parse_args(["grade", "--run", "run.txt"])
    return {k: getattr(args, k) for k in ("max_attempts", "concurrency", "timeout")}


def test_the_llm_judge_starts_from_the_commands_defaults() -> None:
    flags = _grade_flags()
    judge = LLMJudge(model="m", prompt="passage", base_url=URL, api_key="sk-test")
    assert judge.policy.max_attempts == flags["max_attempts"] == defaults.MAX_ATTEMPTS
    assert judge.timeout == flags["timeout"] == defaults.TIMEOUT_S


def test_the_batch_client_retries_as_the_judge_does() -> None:
    client = BatchClient(base_url=URL, api_key="sk-test")
    assert client.policy.max_attempts == _grade_flags()["max_attempts"]
    assert client.timeout == defaults.BATCH_TIMEOUT_S


def test_the_python_api_starts_from_the_commands_defaults() -> None:
    flags = _grade_flags()
    for function in (rg.grade, rg.agrade):
        concurrency = inspect.signature(function).parameters["concurrency"].default
        assert concurrency == flags["concurrency"] == defaults.CONCURRENCY
