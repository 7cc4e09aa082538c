"""The LLM judge through the real openai SDK against the fake server: one test per fault.

Each test asserts the exact resulting Judgment: status, grade or error, attempts, the raw reply
kept, the tokens summed. Backoff waits go through a recording sleep, so nothing really waits.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from grader.cost import PriceTable
from grader.errors import JudgeError
from grader.judges.llm.judge import LLMJudge
from grader.judges.llm.retry import RateLimiter, RetryPolicy
from grader.models import CallRecord, Doc, Judgment, Query, Usage
from grader.prompts import load_prompt
from tests.fakeserver import FakeServer, default_grade, faults, grade_probabilities

KEY = "sk-test-abcdef0123456789SECRET"
QUERY = Query(query_id="q1", text="how do cats purr")
DOC = Doc(doc_id="d1", text="Cats purr by vibrating the muscles of the larynx.")
POLICY = RetryPolicy(max_attempts=5, max_reasks=2, base_delay=0.01, max_delay=0.05)


class Harness:
    """A judge on the fake server with a recording sleep and call log."""

    def __init__(self, server: FakeServer, **kwargs: Any) -> None:
        self.server = server
        self.waits: list[float] = []
        self.calls: list[CallRecord] = []
        options: dict[str, Any] = {
            "model": "gpt-4o-mini",
            "prompt": load_prompt("passage-v1"),
            "base_url": server.base_url,
            "api_key": KEY,
            "policy": POLICY,
            "prices": PriceTable.from_files(),
            "on_call": self.calls.append,
            "timeout": 5.0,
            "sleep": self._sleep,
        }
        options.update(kwargs)
        self.judge = LLMJudge(**options)

    async def _sleep(self, seconds: float) -> None:
        self.waits.append(seconds)

    async def grade(self, query: Query = QUERY, doc: Doc = DOC) -> Judgment:
        return await self.judge.judge(query, doc, key="sha256:k1")

    def usage_of_replies(self) -> Usage:
        """What the server billed: recompute each request's usage as the fake does."""
        total = Usage()
        for record in self.calls:
            total = total + record.usage
        return total


@pytest.fixture
def harness(fake_server: FakeServer) -> Callable[..., Harness]:
    return lambda **kwargs: Harness(fake_server, **kwargs)


def expected_grade() -> int:
    return default_grade({"messages": [{"role": "user", "content": _user_message()}]})


def _user_message() -> str:
    from grader.prompts import render_messages

    messages, _ = render_messages(load_prompt("passage-v1"), QUERY, DOC)
    return messages[1]["content"]


async def test_valid_reply_gives_an_ok_judgment(harness: Callable[..., Harness]) -> None:
    h = harness()
    h.server.cached_tokens = 64
    j = await h.grade()
    assert (j.status, j.grade, j.attempts, j.error) == ("ok", expected_grade(), 1, None)
    assert j.reason == "Scripted by the fake server."
    assert j.judge == "openai:gpt-4o-mini"
    assert j.prompt == load_prompt("passage-v1").ref()
    assert j.key == "sha256:k1" and not j.truncated
    assert j.usage == h.calls[0].usage and j.usage.cached_tokens == 64
    assert j.cost == PriceTable.from_files().cost("gpt-4o-mini", j.usage)
    assert j.grade is not None and j.distribution is not None
    sent = grade_probabilities(j.grade)  # what the fake put in top_logprobs, '"' among them
    in_grades = sum(sent[str(g)] for g in range(4))
    assert j.distribution == pytest.approx([sent[str(g)] / in_grades for g in range(4)])
    assert j.expected_grade == pytest.approx(sum(g * p for g, p in enumerate(j.distribution)))
    body = h.server.requests[0]
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"]["properties"]["grade"]["enum"] == [
        0,
        1,
        2,
        3,
    ]
    assert (body["temperature"], body["max_tokens"], body["logprobs"], body["top_logprobs"]) == (
        0.0,
        300,
        True,
        5,
    )
    assert [c.outcome for c in h.calls] == ["ok"]


async def test_429_waits_retry_after_and_pauses_the_shared_limiter(
    harness: Callable[..., Harness],
) -> None:
    limiter = RateLimiter(rpm=10_000)
    h = harness(limiter=limiter)
    h.server.enqueue(faults.rate_limited(retry_after=None, retry_after_ms="30"))
    j = await h.grade()
    assert (j.status, j.grade, j.attempts) == ("ok", expected_grade(), 2)
    assert h.waits == [pytest.approx(0.03)]
    assert limiter.pauses == 1
    assert [(c.outcome, c.http_status) for c in h.calls] == [("retry", 429), ("ok", 200)]


async def test_without_limits_a_429_still_pauses_every_worker_of_the_judge(
    harness: Callable[..., Harness],
) -> None:
    h = harness()
    h.server.enqueue(faults.rate_limited(retry_after=None, retry_after_ms="20"))
    j = await h.grade()
    assert (j.status, j.attempts) == ("ok", 2)
    assert (h.judge.limiter.rpm, h.judge.limiter.tpm, h.judge.limiter.pauses) == (None, None, 1)


async def test_5xx_are_retried_with_growing_backoff(harness: Callable[..., Harness]) -> None:
    h = harness()
    h.server.enqueue(faults.server_error(500), faults.server_error(503))
    j = await h.grade()
    assert (j.status, j.grade, j.attempts) == ("ok", expected_grade(), 3)
    assert len(h.waits) == 2
    assert 0.0075 <= h.waits[0] <= 0.01 and 0.015 <= h.waits[1] <= 0.02


async def test_persistent_5xx_fails_after_max_attempts_with_the_body_kept(
    harness: Callable[..., Harness],
) -> None:
    h = harness()
    h.server.enqueue(*[faults.server_error(500)] * POLICY.max_attempts)
    j = await h.grade()
    assert (j.status, j.grade, j.attempts) == ("failed", None, POLICY.max_attempts)
    assert j.error is not None and j.error.type == "InternalServerError"
    assert j.error.message.startswith("500 ")
    assert j.error.raw_reply is not None and "The server had an error" in j.error.raw_reply
    assert h.server.counts["requests"] == POLICY.max_attempts


@pytest.mark.slow
async def test_slow_reply_past_the_timeout_is_retried(harness: Callable[..., Harness]) -> None:
    h = harness(timeout=2.0)  # the valid retry must beat it, on a busy machine too
    h.server.enqueue(faults.hang())
    j = await h.grade()
    assert (j.status, j.grade, j.attempts) == ("ok", expected_grade(), 2)
    assert [c.error_type for c in h.calls] == ["APITimeoutError", None]


async def test_timeouts_every_time_fail_with_the_timeout(harness: Callable[..., Harness]) -> None:
    h = harness(timeout=0.2, max_attempts=2)
    h.server.enqueue(faults.slow(3.0), faults.slow(3.0))
    j = await h.grade()
    assert (j.status, j.grade, j.attempts) == ("failed", None, 2)
    assert j.error is not None and j.error.type == "APITimeoutError"
    assert j.error.raw_reply is None


async def test_dropped_connection_is_retried(harness: Callable[..., Harness]) -> None:
    h = harness()
    h.server.enqueue(faults.drop())
    j = await h.grade()
    assert (j.status, j.grade, j.attempts) == ("ok", expected_grade(), 2)
    assert [c.error_type for c in h.calls] == ["APIConnectionError", None]


async def test_malformed_json_is_reasked_with_the_error(harness: Callable[..., Harness]) -> None:
    h = harness()
    h.server.enqueue(faults.malformed_json())
    j = await h.grade()
    assert (j.status, j.grade, j.attempts) == ("ok", expected_grade(), 2)
    first, second = h.server.requests
    assert second["messages"][: len(first["messages"])] == first["messages"]
    bad, reask = second["messages"][len(first["messages"]) :]
    assert bad == {"role": "assistant", "content": "{'reason': 'single quotes', grade: 2"}
    assert reask["role"] == "user" and "not valid JSON" in reask["content"]
    assert j.usage == h.usage_of_replies()
    assert j.usage.prompt_tokens > h.calls[0].usage.prompt_tokens  # both attempts billed
    assert h.waits == [0.0]


async def test_out_of_range_grade_is_reasked_then_fails_never_a_grade(
    harness: Callable[..., Harness],
) -> None:
    h = harness()
    h.server.enqueue(*[faults.bad_grade(7)] * 3)
    j = await h.grade()
    assert (j.status, j.grade, j.attempts) == ("failed", None, 3)
    assert j.error is not None and j.error.type == "InvalidReply"
    assert j.error.message.startswith("out_of_range: grade 7 is outside 0..3")
    assert j.error.raw_reply == json.dumps({"reason": "Scripted by the fake server.", "grade": 7})
    assert j.usage == h.usage_of_replies() and j.usage.completion_tokens > 0
    assert j.distribution is None and j.expected_grade is None


async def test_out_of_range_then_valid_is_ok(harness: Callable[..., Harness]) -> None:
    h = harness()
    h.server.enqueue(faults.bad_grade(-1))
    j = await h.grade()
    assert (j.status, j.grade, j.attempts) == ("ok", expected_grade(), 2)


async def test_truncated_reply_is_reasked_then_fails(harness: Callable[..., Harness]) -> None:
    h = harness()
    h.server.enqueue(*[faults.truncated()] * 3)
    j = await h.grade()
    assert (j.status, j.grade, j.attempts) == ("failed", None, 3)
    assert j.error is not None and j.error.message.startswith("length: the reply was cut off")
    assert j.error.raw_reply is not None and j.error.raw_reply.startswith('{"reason"')


async def test_refusal_is_reasked_then_fails(harness: Callable[..., Harness]) -> None:
    h = harness()
    h.server.enqueue(*[faults.refusal("I can't grade this.")] * 3)
    j = await h.grade()
    assert (j.status, j.grade, j.attempts) == ("failed", None, 3)
    assert (
        j.error is not None and j.error.message == "refusal: the model refused: I can't grade this."
    )
    assert j.error.raw_reply == "I can't grade this."
    assert h.server.requests[1]["messages"][-2] == {
        "role": "assistant",
        "content": "I can't grade this.",
    }


async def test_non_json_body_is_resent_unchanged(harness: Callable[..., Harness]) -> None:
    h = harness()
    h.server.enqueue(faults.not_json_body())
    j = await h.grade()
    assert (j.status, j.grade, j.attempts) == ("ok", expected_grade(), 2)
    assert h.server.requests[0] == h.server.requests[1]  # not a re-ask: the model said nothing


async def test_non_json_body_every_time_fails_with_the_body(
    harness: Callable[..., Harness],
) -> None:
    h = harness(max_attempts=2)
    h.server.enqueue(faults.not_json_body(), faults.not_json_body())
    j = await h.grade()
    assert (j.status, j.grade, j.attempts) == ("failed", None, 2)
    assert j.error is not None and j.error.message.startswith("not_json_body")
    assert j.error.raw_reply == "<html><body>502 Bad Gateway</body></html>"


async def test_bad_request_is_not_retried(harness: Callable[..., Harness]) -> None:
    h = harness()
    h.server.enqueue(faults.error(400, "The 'temperature' value is not a number"))
    j = await h.grade()
    assert (j.status, j.grade, j.attempts) == ("failed", None, 1)
    assert j.error is not None and j.error.type == "BadRequestError"
    assert "temperature" in j.error.message


async def test_a_prompt_past_the_context_fails_for_good_under_its_own_name(
    harness: Callable[..., Harness],
) -> None:
    h = harness()
    h.server.enqueue(faults.error(400, "This model's maximum context length is 8192 tokens"))
    j = await h.grade()
    assert (j.status, j.grade, j.attempts) == ("failed", None, 1)
    assert j.error is not None and j.error.type == "ContextLengthExceeded"
    assert "maximum context length" in j.error.message


@pytest.mark.parametrize(
    ("status", "message", "code"),
    [
        (401, f"Incorrect API key provided: {KEY}", "invalid_api_key"),
        (404, "The model `gpt-x` does not exist", "model_not_found"),
        (429, "You exceeded your current quota", "insufficient_quota"),
    ],
)
async def test_bad_key_unknown_model_or_no_quota_is_fatal_and_never_shows_the_key(
    harness: Callable[..., Harness], status: int, message: str, code: str
) -> None:
    h = harness()
    h.server.enqueue(faults.error(status, message, code))
    with pytest.raises(JudgeError) as caught:
        await h.grade()
    assert str(status) in str(caught.value)
    assert KEY not in str(caught.value) and KEY not in repr(caught.value)
    assert h.server.counts["requests"] == 1
    assert all(KEY not in (c.error_message or "") for c in h.calls)


async def test_the_key_is_never_in_a_failed_judgment(harness: Callable[..., Harness]) -> None:
    h = harness(max_attempts=1)
    h.server.enqueue(faults.error(500, f"upstream rejected key {KEY}"))
    j = await h.grade()
    assert j.status == "failed"
    assert KEY not in j.model_dump_json()
    assert "[redacted]" in (j.error.message if j.error else "")
    assert h.server.headers[0]["authorization"] == f"Bearer {KEY}"  # it was sent, only there
    assert all(KEY not in repr(c) for c in h.calls)


async def test_failure_modes_are_recorded_per_attempt(harness: Callable[..., Harness]) -> None:
    h = harness()
    h.server.enqueue(faults.rate_limited("0"), faults.drop(), faults.bad_grade(5))
    j = await h.grade()
    assert (j.status, j.attempts) == ("ok", 4)
    assert [(c.attempt, c.outcome, c.error_type) for c in h.calls] == [
        (1, "retry", "RateLimitError"),
        (2, "retry", "APIConnectionError"),
        (3, "invalid", "InvalidReply.out_of_range"),
        (4, "ok", None),
    ]
    assert all(c.output_mode == "json_schema" and c.key == "sha256:k1" for c in h.calls)


async def test_unknown_model_has_no_cost_and_no_crash(harness: Callable[..., Harness]) -> None:
    h = harness(model="local-llama")
    j = await h.grade()
    assert (j.status, j.cost) == ("ok", None)
    assert j.judge == "openai:local-llama"
