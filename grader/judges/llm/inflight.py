"""How many requests a judge keeps in flight, lowered when the server turns out to queue them.

The bound halves when a request times out while the server answered another meanwhile, and each
request's deadline follows the queue (`Ticket`): slow is not dead, so a request behind others is cut
at `--timeout` only once it is the oldest.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(eq=False)
class Ticket:
    """One request in flight: when it was sent, its deadline's handle (`asyncio.Timeout`,
    set by the sender), and whether the server answered anything since it was sent."""

    sent: float
    bound: asyncio.Timeout | None = None
    progressed: bool = False
    head_deadline: float | None = None


class InFlight:
    """The bound on requests in flight (module docstring); one per judge, one event loop."""

    def __init__(
        self,
        on_notice: Callable[[str], None] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        timeout: float | None = None,
    ) -> None:
        self.limit: int | None = None
        self.active = 0
        self.peak = 0
        self.clock = clock
        """The time a request is sent and answered at (`sent_at` of `timed_out`)."""
        self.last_answer = 0.0
        self.lowered_at = float("-inf")
        self.timeout = timeout
        """`--timeout`: with it, deadlines follow the server's queue (module docstring)."""
        self.tickets: list[Ticket] = []
        self.answers: list[float] = []
        """When the server's recent answers came (those of the last `timeout`)."""
        self._on_notice = on_notice
        self._changed = asyncio.Condition()

    async def __aenter__(self) -> Ticket:
        async with self._changed:
            await self._changed.wait_for(lambda: self.limit is None or self.active < self.limit)
            self.active += 1
            self.peak = max(self.peak, self.active)
        ticket = Ticket(self.clock())
        self.tickets.append(ticket)
        return ticket

    async def __aexit__(self, *exc: object) -> None:
        async with self._changed:
            self.active -= 1
            self._changed.notify_all()

    def done(self, ticket: Ticket) -> None:
        """`ticket`'s request is over (answered, failed or cut): the ones behind move up."""
        if ticket in self.tickets:
            self.tickets.remove(ticket)
        self._reschedule()

    def answered(self, ticket: Ticket | None = None) -> None:
        """The server sent an answer now (to `ticket`'s request)."""
        now = self.last_answer = self.clock()
        if self.timeout is None:
            return
        self.answers = [t for t in self.answers if now - t <= self.timeout] + [now]
        if ticket is not None and now - ticket.sent > self.timeout:
            self._paced(now)
        for other in self.tickets:
            other.progressed = other.progressed or other.sent < now
        if ticket is not None:
            self.done(ticket)

    def longest(self, ticket: Ticket) -> float | None:
        """The most `ticket`'s request can wait by this rule, with a margin (None: no timeout)."""
        if self.timeout is None:
            return None
        return self.timeout * (self.tickets.index(ticket) + 2)

    def deadline(self, ticket: Ticket, oldest: bool) -> float | None:
        """When `ticket`'s request is cut (`clock` time; None: not while older ones are in
        flight), by the module docstring's rule."""
        assert self.timeout is not None
        if not ticket.progressed:
            return ticket.sent + self.timeout
        if not oldest:
            return None
        if ticket.head_deadline is None:
            ticket.head_deadline = max(ticket.sent, self.last_answer) + self.timeout
        return ticket.head_deadline

    def _reschedule(self) -> None:
        if self.timeout is None:
            return
        for i, ticket in enumerate(self.tickets):
            when = self.deadline(ticket, oldest=i == 0)
            if ticket.bound is not None and not ticket.bound.expired():
                with contextlib.suppress(RuntimeError):  # it is being left: nothing to move
                    ticket.bound.reschedule(when)

    def _paced(self, now: float) -> None:
        """A request waited past `timeout` in the queue and was answered: bring the bound on
        requests in flight down to the answers of the last `timeout` (at least 1)."""
        served = max(1, len(self.answers))
        current = self.limit if self.limit is not None else self.peak
        if served >= current:
            return
        self.limit = served
        self.lowered_at = now
        if self._on_notice is not None:
            self._on_notice(
                f"the server queues requests and answers about {served} per --timeout: this "
                f"run now keeps at most {served} in flight (start with --concurrency {served} "
                "to skip this)"
            )

    def timed_out(self, sent_at: float) -> bool:
        """A request sent at `sent_at` timed out; True when that lowered the bound (the server
        answered another meanwhile, and the request was not in the burst that lowered it last)."""
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
