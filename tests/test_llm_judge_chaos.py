"""Many concurrent judgments under a random mix of every fault: each ends ok with the grade the
server meant, or failed with a reason. None is lost, none is silently 0, attempts add up.

The fake server hands its queued faults to requests in arrival order (one event loop, no await
between taking a fault and logging the request), so request i got queue slot i: the test knows
which requests of which pair were faulted. A pass-through slot (`slow(0)`: a valid reply, at
once) mixes ok replies in, so some pairs exhaust their attempts and some get a grade.

The one fault that needs a clock is the slow reply: it comes after `SLOW_S`, far past the judge's
`TIMEOUT_S`, and every other reply must come well within `TIMEOUT_S` even on a busy machine
(the server is a thread of this process, sharing its cores and its GIL). With a short timeout
a busy machine timed out valid replies too: requests the server had not logged yet broke the
slot accounting, and enough timeouts in a row declared the server not answering.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import pytest

from grader.judges.llm.judge import LLMJudge
from grader.judges.llm.retry import RateLimiter, RetryPolicy
from grader.models import CallRecord, Doc, Judgment, Query
from tests.fakeserver import FakeServer, Fault, default_grade, faults

TIMEOUT_S = 3.0
"""The judge's deadline per request: only the slow fault reaches it."""
SLOW_S = 60.0
"""How late the slow fault replies (the client has hung up long before)."""

FAULTS: list[Fault] = [
    faults.rate_limited("0"),
    faults.server_error(500),
    faults.server_error(503),
    faults.slow(SLOW_S),
    faults.drop(),
    faults.malformed_json(),
    faults.bad_grade(7),
    faults.truncated(),
    faults.refusal(),
    faults.not_json_body(),
    faults.content("I think 2"),
    faults.content('{"reason": "r", "grade": null}'),
    faults.content(""),
    faults.content('{"reason": "r", "grade": 3, "grade": 0}'),
]
PASS = faults.slow(0.0)
"""A queue slot that is no fault: the valid reply the server means, sent at once."""


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, pytest.param(2, marks=pytest.mark.slow)])
async def test_every_pair_ends_ok_or_failed_never_lost_never_zero(
    fake_server: FakeServer, seed: int
) -> None:
    rng = random.Random(seed)
    queue = [rng.choice(FAULTS) if rng.random() < 0.7 else PASS for _ in range(200)]
    fake_server.enqueue(*queue)
    calls: list[CallRecord] = []
    judge = LLMJudge(
        model="fake-model",
        prompt="passage-v1",
        base_url=fake_server.base_url,
        api_key="sk-test",
        timeout=TIMEOUT_S,
        policy=RetryPolicy(max_attempts=4, max_reasks=2, base_delay=0.001, max_delay=0.004),
        limiter=RateLimiter(rpm=100_000, tpm=10_000_000),
        on_call=calls.append,
    )
    pairs = [
        (Query(query_id=f"q{i % 5}", text=f"query {i % 5}"), Doc(doc_id=f"d{i}", text=f"doc {i}"))
        for i in range(40)
    ]
    semaphore = asyncio.Semaphore(8)

    async def one(i: int, query: Query, doc: Doc) -> tuple[int, Judgment]:
        async with semaphore:
            return i, await judge.judge(query, doc, key=f"k{i}")

    results = await asyncio.gather(*(one(i, q, d) for i, (q, d) in enumerate(pairs)))
    judgments = [j for _, j in sorted(results, key=lambda r: r[0])]
    assert [j.doc_id for j in judgments] == [d.doc_id for _, d in pairs]  # none lost
    per_doc: dict[str, list[Fault]] = {d.doc_id: [] for _, d in pairs}
    first_bodies: dict[str, dict[str, Any]] = {}
    for n, body in enumerate(fake_server.requests):
        first_bodies.setdefault(body["messages"][1]["content"], body)
        doc = next(d for _, d in pairs if f"\n{d.text}\n" in body["messages"][1]["content"])
        per_doc[doc.doc_id].append(queue[n] if n < len(queue) else PASS)
    for (_, doc), j in zip(pairs, judgments, strict=True):
        served = per_doc[doc.doc_id]
        assert len(served) == j.attempts
        if j.status == "ok":
            body = next(b for u, b in first_bodies.items() if f"\n{doc.text}\n" in u)
            assert j.grade == default_grade(body)  # the grade the server meant, not a default
            assert j.error is None
            assert served[-1] is PASS  # the grade came from a valid reply, never from a fault
        else:
            assert j.grade is None and j.error is not None and j.error.message
            assert j.distribution is None and j.expected_grade is None
        if all(f is not PASS for f in served):
            assert j.status == "failed", (doc.doc_id, served)  # every request faulted: no grade
        assert 1 <= j.attempts <= 4
        assert j.attempts == sum(1 for c in calls if c.key == j.key)
    assert sum(j.attempts for j in judgments) == fake_server.counts["requests"]
    failed = [j for j in judgments if j.status == "failed"]
    assert failed, "with 70% of replies faulted some pair must exhaust its attempts"
    assert any(j.status == "ok" for j in judgments)
    content_faults = {"content"} & {f.kind for fs in per_doc.values() for f in fs}
    assert content_faults, "the bad-content faults were served"
