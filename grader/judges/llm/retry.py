"""When to retry and how long to wait (tenacity, in `grader.judges.llm.judge`, drives the loop),
and the shared rate limiter: two one-minute buckets, and a 429's `pause` holds back every worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import openai

from grader import defaults

RETRY_STATUSES = frozenset({408, 409, 429})
FATAL_STATUSES = frozenset({401, 403, 404})


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try: attempts are HTTP requests per judgment (transport retries and re-asks
    share them); `max_reasks` bounds the re-asks on invalid content among them."""

    max_attempts: int = defaults.MAX_ATTEMPTS
    max_reasks: int = 2
    base_delay: float = 0.5
    max_delay: float = 8.0
    max_retry_after: float = 60.0
    jitter: float = 0.25


def status_of(exc: BaseException) -> int | None:
    return exc.status_code if isinstance(exc, openai.APIStatusError) else None


def is_context_exceeded(message: str) -> bool:
    """Whether a server's error message says the prompt is past its context (OpenAI's and
    llama.cpp's code `context_length_exceeded`, vLLM's "maximum context length")."""
    said = message.lower()
    return "context_length_exceeded" in said or "maximum context length" in said


def should_retry(exc: BaseException) -> bool:
    """Timeouts, connection errors, 408/409/429 and 5xx are transient; the server may override
    with `x-should-retry: true|false`. Everything else (400, 401, 403, 404, 422, an exhausted
    quota, a prompt past the context whatever its status) is not."""
    if isinstance(exc, openai.APITimeoutError | openai.APIConnectionError):
        return True
    if not isinstance(exc, openai.APIStatusError) or is_fatal(exc):
        return False
    if exc.code == "context_length_exceeded" or is_context_exceeded(exc.response.text[:4000]):
        return False
    hint = exc.response.headers.get("x-should-retry", "").lower()
    if hint in ("true", "false"):
        return hint == "true"
    return exc.status_code in RETRY_STATUSES or exc.status_code >= 500


def is_fatal(exc: BaseException) -> bool:
    """Errors that doom every request of the run: bad key, no permission, unknown model/URL,
    and a 429 that is not a rate limit but an exhausted quota (`insufficient_quota`)."""
    if status_of(exc) == 429:
        return getattr(exc, "code", None) == "insufficient_quota"
    return status_of(exc) in FATAL_STATUSES


def parse_retry_after(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds the server asked us to wait (`retry-after-ms`, else `retry-after`), or None."""
    with contextlib.suppress(KeyError, ValueError):
        return max(0.0, float(headers["retry-after-ms"]) / 1000.0)
    raw = headers.get("retry-after")
    if raw is None:
        return None
    with contextlib.suppress(ValueError):
        return max(0.0, float(raw))
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError):
        return None
    current = time.time() if now is None else now
    return max(0.0, when.timestamp() - current)


def retry_delay(
    exc: BaseException,
    attempt: int,
    policy: RetryPolicy,
    *,
    now: float | None = None,
    rand: Callable[[], float] = random.random,
) -> float:
    """How long to wait after `attempt` failed requests: the server's Retry-After (capped), else
    exponential backoff less up to `jitter` of it at random."""
    headers = exc.response.headers if isinstance(exc, openai.APIStatusError) else {}
    asked = parse_retry_after(headers, now=now)
    if asked is not None:
        return min(asked, policy.max_retry_after)
    delay: float = min(policy.max_delay, policy.base_delay * 2.0 ** max(0, attempt - 1))
    return delay * (1.0 - policy.jitter * rand())


class _Bucket:
    def __init__(self, per_minute: float, now: float) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self.level = self.capacity
        self.stamp = now

    def wait_for(self, amount: float, now: float) -> float:
        """Seconds until `amount` is available; an oversized one waits for a full bucket."""
        self.level = min(self.capacity, self.level + (now - self.stamp) * self.rate)
        self.stamp = now
        need = min(amount, self.capacity)
        if self.level >= need:
            return 0.0
        return (need - self.level) / self.rate

    def take(self, amount: float) -> None:
        self.level -= min(amount, self.capacity)


class RateLimiter:
    """Requests-per-minute and tokens-per-minute limits plus a shared pause (see module doc)."""

    def __init__(
        self,
        rpm: float | None = None,
        tpm: float | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if (rpm is not None and rpm <= 0) or (tpm is not None and tpm <= 0):
            raise ValueError("rpm and tpm must be positive")
        self.rpm = rpm
        self.tpm = tpm
        self._clock = clock
        now = clock()
        self._requests = _Bucket(rpm, now) if rpm else None
        self._tokens = _Bucket(tpm, now) if tpm else None
        self._paused_until = 0.0
        self._lock = asyncio.Lock()
        self.pauses = 0

    def pause(self, seconds: float) -> None:
        """Hold every worker back for `seconds` from now (a 429 was received)."""
        until = self._clock() + max(0.0, seconds)
        if until > self._paused_until:
            self._paused_until = until
            self.pauses += 1

    def delay(self, tokens: int = 0) -> float:
        """Seconds to wait before a request of `tokens` may go (0: now); takes nothing."""
        now = self._clock()
        wait = max(0.0, self._paused_until - now)
        if self._requests is not None:
            wait = max(wait, self._requests.wait_for(1, now))
        if self._tokens is not None:
            wait = max(wait, self._tokens.wait_for(tokens, now))
        return wait

    async def acquire(self, tokens: int = 0) -> None:
        """Wait until one request of about `tokens` tokens fits every limit, then take it."""
        async with self._lock:
            while (wait := self.delay(tokens)) > 0:
                await asyncio.sleep(wait)
            if self._requests is not None:
                self._requests.take(1)
            if self._tokens is not None:
                self._tokens.take(tokens)

    def settle(self, estimated: int, actual: int) -> None:
        """Correct the token bucket once a reply says how many tokens the request really used."""
        if self._tokens is not None and estimated:
            self._tokens.level = min(self._tokens.capacity, self._tokens.level + estimated - actual)
