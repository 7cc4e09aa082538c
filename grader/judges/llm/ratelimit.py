"""A shared async limiter: requests per minute, tokens per minute, and a pause after a 429.

Shared by every worker of a run: two token buckets of one minute's worth, and a 429's `pause` holds
back every worker, so the whole run backs off together.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class _Bucket:
    def __init__(self, per_minute: float, now: float) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self.level = self.capacity
        self.stamp = now

    def wait_for(self, amount: float, now: float) -> float:
        """Seconds until `amount` is available (0: take it now). Amounts above the capacity
        wait for a full bucket, so an oversized request is slow, never stuck."""
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
        if self._requests is None and self._tokens is None:
            while (wait := self._paused_until - self._clock()) > 0:
                await asyncio.sleep(wait)
            return
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
