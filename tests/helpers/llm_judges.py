"""An LLM judge on the fake server with quick retries, the pairs it grades, and the output
formats of the requests the server saw."""

from __future__ import annotations

from typing import Any

from grader.judges.llm.judge import LLMJudge
from grader.judges.llm.retry import RetryPolicy
from grader.models import Doc, Query
from tests.fakeserver import FakeServer

QUICK_POLICY = RetryPolicy(max_attempts=4, max_reasks=2, base_delay=0.001, max_delay=0.002)
"""Four attempts, two re-asks, backoff of a millisecond or two."""


def make_judge(server: FakeServer, **kwargs: Any) -> LLMJudge:
    """An LLMJudge of `fake-model` with `passage-v1` on `server` (QUICK_POLICY); `kwargs` are
    LLMJudge's own and override these."""
    options: dict[str, Any] = {
        "model": "fake-model",
        "prompt": "passage-v1",
        "base_url": server.base_url,
        "api_key": "sk-test",
        "policy": QUICK_POLICY,
    }
    options.update(kwargs)
    return LLMJudge(**options)


def pairs(n: int) -> list[tuple[Query, Doc]]:
    """`n` pairs: query `q{i}` with document `d{i}`."""
    return [
        (Query(query_id=f"q{i}", text=f"query {i}"), Doc(doc_id=f"d{i}", text=f"document {i}"))
        for i in range(n)
    ]


def formats(server: FakeServer, *, schema: bool = False) -> list[str]:
    """Each request's response_format type ("text" without one); with `schema`, `+schema`
    added when it carries a schema."""
    out = []
    for body in server.requests:
        fmt = body.get("response_format") or {}
        out.append(fmt.get("type", "text") + ("+schema" if schema and "schema" in fmt else ""))
    return out
