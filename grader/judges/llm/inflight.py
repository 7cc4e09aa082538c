"""How many requests a judge keeps in flight, lowered when the server turns out to queue them.

A server that answers one request at a time (llama.cpp's server with one slot) keeps the others
waiting in its queue; with `--concurrency 8` and a model taking 5 s a reply, the eighth request
waits 35 s before the model starts on it, and a `--timeout` that fits one reply cuts it off
there: a timeout the client itself caused, retried into the same queue. `InFlight` bounds the
requests sent at once. It starts unbounded (the run's worker count bounds it); when a request
times out while the server has answered another within that request's time, the server is
queueing, and the bound halves (down to 1), told once per change through `on_notice`. The
requests in flight when the bound was lowered time out together (a burst): the first of them
halves the bound, the rest were sent under the old bound and leave it as it is; only a timeout
of a request sent since halves it again. A request waiting for its turn here is not yet sent,
so its deadline has not started: only the server's time counts against `--timeout`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from types import TracebackType


class InFlight:
    """The bound on requests in flight (module docstring); one per judge, one event loop."""

    def __init__(
        self,
        on_notice: Callable[[str], None] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit: int | None = None
        self.active = 0
        self.peak = 0
        self.clock = clock
        """The time a request is sent and answered at (`sent_at` of `timed_out`)."""
        self.last_answer = 0.0
        self.lowered_at = float("-inf")
        self._on_notice = on_notice
        self._changed: asyncio.Condition | None = None

    def _condition(self) -> asyncio.Condition:
        if self._changed is None:
            self._changed = asyncio.Condition()
        return self._changed

    async def __aenter__(self) -> None:
        changed = self._condition()
        async with changed:
            await changed.wait_for(lambda: self.limit is None or self.active < self.limit)
            self.active += 1
            self.peak = max(self.peak, self.active)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        changed = self._condition()
        async with changed:
            self.active -= 1
            changed.notify_all()

    def answered(self) -> None:
        """The server sent an answer now."""
        self.last_answer = self.clock()

    def timed_out(self, sent_at: float) -> bool:
        """A request sent at `sent_at` (`clock`) timed out; True when that lowered the bound
        (the server answered another request meanwhile: it is queueing, not gone; and the
        request was sent after the bound was last lowered, not in the burst that lowered it)."""
        if self.last_answer <= sent_at or sent_at <= self.lowered_at:
            return False
        current = self.limit if self.limit is not None else self.peak
        lowered = max(1, current // 2)
        if self.limit is not None and lowered >= self.limit:
            return False
        self.limit = lowered
        self.lowered_at = self.clock()
        if self._on_notice is not None:
            self._on_notice(
                f"a request timed out while the server answered others: it queues requests, so "
                f"this run now keeps at most {lowered} in flight (time waiting for a turn here "
                f"does not count against --timeout; start with --concurrency {lowered} to skip "
                "this)"
            )
        return True
