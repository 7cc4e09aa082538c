"""Retry decisions (pure functions, frozen time) and the shared rate limiter (frozen clock)."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from email.utils import format_datetime

import httpx2
import openai
import pytest

from grader.judges.llm.retry import (
    RateLimiter,
    RetryPolicy,
    is_fatal,
    parse_retry_after,
    retry_delay,
    should_retry,
)

URL = "http://127.0.0.1:1/v1/chat/completions"
NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC).timestamp()


def status_error(
    status: int, headers: dict[str, str] | None = None, code: str | None = None
) -> openai.APIStatusError:
    request = httpx2.Request("POST", URL)
    response = httpx2.Response(status, headers=headers or {}, request=request)
    cls = {429: openai.RateLimitError, 401: openai.AuthenticationError}.get(
        status, openai.APIStatusError
    )
    body = {"message": f"error {status}", "code": code} if code else None
    return cls(f"error {status}", response=response, body=body)


@pytest.mark.parametrize(
    ("status", "retry"),
    [
        *[(s, True) for s in (429, 500, 502, 503, 408, 409)],
        *[(s, False) for s in (400, 401, 403, 404, 422)],
    ],
)
def test_should_retry_by_status(status: int, retry: bool) -> None:
    assert should_retry(status_error(status)) is retry


def test_transport_errors_are_retried_and_other_errors_not() -> None:
    request = httpx2.Request("POST", URL)
    assert should_retry(openai.APITimeoutError(request=request))
    assert should_retry(openai.APIConnectionError(request=request))
    assert not should_retry(ValueError("bug"))


def test_the_server_can_override_with_x_should_retry() -> None:
    assert not should_retry(status_error(503, {"x-should-retry": "false"}))
    assert should_retry(status_error(400, {"x-should-retry": "true"}))


def test_an_exhausted_quota_is_fatal_not_a_rate_limit() -> None:
    quota = status_error(429, code="insufficient_quota")
    assert is_fatal(quota) and not should_retry(quota)
    assert not is_fatal(status_error(429, code="rate_limit_exceeded"))


def test_fatal_statuses() -> None:
    assert [is_fatal(status_error(s)) for s in (401, 403, 404, 429, 500)] == [
        True,
        True,
        True,
        False,
        False,
    ]


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after-ms": "soon", "retry-after": "9"}, 9.0),
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after": "tomorrow-ish"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], seconds: float | None) -> None:
    assert parse_retry_after(headers, now=NOW) == seconds


def test_parse_retry_after_http_date_with_frozen_now() -> None:
    later = datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)
    assert parse_retry_after({"retry-after": format_datetime(later, usegmt=True)}, now=NOW) == 30.0
    earlier = datetime(2026, 1, 1, 11, 0, 0, tzinfo=UTC)
    assert parse_retry_after({"retry-after": format_datetime(earlier, usegmt=True)}, now=NOW) == 0


def test_backoff_doubles_to_the_cap_and_jitters_down_only() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=4.0, jitter=0.25)
    exc = status_error(500)
    assert [retry_delay(exc, n, policy, rand=lambda: 0.0) for n in range(1, 6)] == [0.5, 1, 2, 4, 4]
    assert [retry_delay(exc, n, policy, rand=lambda: 1.0) for n in range(1, 4)] == [
        0.375,
        0.75,
        1.5,
    ]


def test_retry_delay_prefers_the_server_and_caps_it() -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=4.0, max_retry_after=20.0)
    assert retry_delay(status_error(429, {"retry-after": "3"}), 1, policy, now=NOW) == 3.0
    assert retry_delay(status_error(429, {"retry-after": "3600"}), 1, policy, now=NOW) == 20.0
    assert retry_delay(status_error(500), 2, policy, rand=lambda: 0.0) == 1.0


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_limiter_rpm_bucket_with_a_frozen_clock() -> None:
    clock = Clock()
    limiter = RateLimiter(rpm=60, clock=clock)  # one per second, a burst of 60
    assert limiter.delay() == 0.0
    assert limiter._requests is not None
    limiter._requests.take(60)
    assert limiter.delay() == pytest.approx(1.0)
    clock.now += 0.5
    assert limiter.delay() == pytest.approx(0.5)


def test_limiter_tpm_bucket_and_settle() -> None:
    clock = Clock()
    limiter = RateLimiter(tpm=6000, clock=clock)  # 100 tokens per second
    assert limiter._tokens is not None
    limiter._tokens.take(6000)
    assert limiter.delay(500) == pytest.approx(5.0)
    limiter.settle(estimated=1000, actual=400)  # the request used less than reserved
    assert limiter.delay(500) == pytest.approx(0.0)
    assert limiter.delay(10**9) == pytest.approx(54.0)  # oversized: waits for a full bucket


def test_pause_holds_everyone_and_keeps_the_longest() -> None:
    clock = Clock()
    limiter = RateLimiter(clock=clock)
    limiter.pause(5)
    limiter.pause(2)
    assert limiter.delay() == 5.0 and limiter.pauses == 1
    clock.now += 5
    assert limiter.delay() == 0.0


async def test_acquire_holds_every_worker_until_the_pause_ends() -> None:
    limiter = RateLimiter(rpm=1000)
    limiter.pause(0.05)
    resume_at = limiter._paused_until
    released: list[float] = []

    async def worker() -> None:
        await limiter.acquire()
        released.append(time.monotonic())

    await asyncio.gather(worker(), worker(), worker())
    assert len(released) == 3 and min(released) >= resume_at


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        RateLimiter(rpm=0)
