"""Bounds on talking to a server: a deadline for each whole request, what a failed connection
was, when to give up on the server (`ServerHealth`: the run stops rather than pay every pair's
timeouts), and how many requests to keep in flight (`InFlight`: slow is not dead).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import httpx2
import openai

from grader.judges.llm.client import ReplyTooLarge

DEAD_AFTER = 16
"""Transport failures in a row, with no answer between, that mean a server is not answering."""


def dead_after_for(concurrency: int) -> int:
    """The not-answering threshold for `concurrency` workers: max(16, 2 x concurrency)."""
    return max(DEAD_AFTER, 2 * concurrency)


def unreachable_after_for(concurrency: int) -> int:
    """Failures to connect, nothing ever answered, that stop a run: one a worker, at least 2."""
    return max(2, concurrency)


@asynccontextmanager
async def deadline(seconds: float | None, method: str, url: str) -> AsyncIterator[asyncio.Timeout]:
    """Bound the whole request in the block to `seconds`; an overrun is `APITimeoutError`."""
    try:
        async with asyncio.timeout(seconds) as bound:
            yield bound
    except TimeoutError as exc:
        raise openai.APITimeoutError(request=httpx2.Request(method, url)) from exc


SAME_FAILURE_S = 10.0
"""Seconds the same failure must last, besides its count, before it stops a run."""
MIN_PAIRS = 3
"""Pairs the same failure must have hit before it stops a run (`ServerHealth.same_failure`)."""


class ServerHealth:
    """Whether a server is not answering: `threshold` transport failures in a row, the same
    failure to everything, or (sooner) the first requests all failing to connect."""

    def __init__(
        self,
        threshold: int = DEAD_AFTER,
        unreachable_after: int | None = None,
        *,
        quiet_s: float = 0.0,
        same_for_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if threshold < 1:
            raise ValueError("the not-answering threshold must be at least 1")
        if unreachable_after is not None and unreachable_after < 1:
            raise ValueError("the unreachable threshold must be at least 1")
        self.threshold = threshold
        self.unreachable_after = unreachable_after
        self.in_a_row = 0
        self.dead = False
        self.ever_answered = False
        self.connect_failures = 0
        self.unreachable: str | None = None  # the cause when the server was never reached
        self.dropped: str | None = None  # a connection closed mid-reply, before any answer
        self.quiet_s = quiet_s
        self.clock = clock
        self.last_answer = clock()
        self.same_for_s = same_for_s
        self.cause: str | None = None
        self.since = 0.0
        self.same = 0
        self.pairs: set[str] = set()
        self.failing: str | None = None  # the cause and its last message, once it stopped the run

    def same_failure(self, cause: str, key: str, message: str) -> bool:
        """An attempt of pair `key` failed with `cause`; True once that cause, `threshold` times in
        a row over MIN_PAIRS pairs and `same_for_s` seconds, makes the server dead."""
        if cause != self.cause:
            self.cause, self.same, self.pairs, self.since = cause, 0, set(), self.clock()
        self.same += 1
        self.pairs.add(key)
        lasted = self.clock() - self.since >= self.same_for_s
        if (
            self.same >= self.threshold
            and len(self.pairs) >= MIN_PAIRS
            and lasted
            and not self.dead
        ):
            self.failing = f"{cause}: {message}"
            self.dead = True
        return self.dead

    def answered(self, *, ok: bool = False) -> None:
        """The server sent an HTTP answer (any status): it is there; `ok` (a 200) starts the
        same-failure count over."""
        if ok:
            self.cause, self.same, self.pairs = None, 0, set()
        self.ever_answered = True
        self.last_answer = self.clock()
        if not self.dead:
            self.in_a_row = 0

    def failed(self, *, timed_out: bool = False) -> bool:
        """One more timeout or connection failure; True once the server counts as dead for good."""
        self.in_a_row += 1
        quiet = not timed_out or self.clock() - self.last_answer >= self.quiet_s
        if self.in_a_row >= self.threshold and quiet:
            self.dead = True
        return self.dead

    def transport_failed(self, exc: openai.APIError, key: str) -> bool:
        """An attempt of pair `key` got no HTTP answer (`exc`); True once the server is dead."""
        large = too_large(exc)
        if large is not None:  # the server answered, too much: the same failure, maybe again
            self.answered()
            return self.same_failure(str(large), key, "the read stopped there")
        if not isinstance(exc, openai.APIConnectionError):
            return self.dead
        timed_out = isinstance(exc, openai.APITimeoutError)
        self.failed(timed_out=timed_out)
        cause = connect_failure(exc)
        if self.ever_answered or timed_out:
            return self.dead
        if cause is None and self.dropped is None:  # connected, then closed with no reply
            self.dropped = connection_message(exc)
        elif cause is not None and self.unreachable_after is not None:
            self.connect_failures += 1
            if self.connect_failures >= self.unreachable_after and not self.dead:
                self.unreachable = cause
                self.dead = True
        return self.dead


CONNECT_CAUSES = ("connection refused", "DNS lookup failed", "TLS failed", "could not connect")
"""The labels `connect_failure` starts its text with; the part before the colon."""


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not s for s in seen) and len(seen) < 16:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def too_large(exc: BaseException) -> ReplyTooLarge | None:
    """The `ReplyTooLarge` in `exc`'s chain, if any."""
    return next((e for e in _chain(exc) if isinstance(e, ReplyTooLarge)), None)


def connect_failure(exc: BaseException) -> str | None:
    """`label: detail` when `exc` is a failure to connect (a `CONNECT_CAUSES` label), else None."""
    if not isinstance(exc, openai.APIConnectionError) or isinstance(exc, openai.APITimeoutError):
        return None
    chain = _chain(exc)
    if not any(type(e).__name__ == "ConnectError" for e in chain):
        return None  # reached the server, then lost it (a dropped connection)
    root = chain[-1]
    detail = str(root) or type(root).__name__
    for e in chain:
        if isinstance(e, ConnectionRefusedError):
            return f"connection refused: {e}"
        if isinstance(e, socket.gaierror):
            return f"DNS lookup failed: {e}"
        if isinstance(e, ssl.SSLError):
            return f"TLS failed: {e}"
    return f"could not connect: {detail}"


def connection_message(exc: openai.APIConnectionError) -> str:
    """The SDK's message with the cause the chain holds: "Connection error. (connection refused:
    ...)", or "Connection error. (connection dropped: ...)" once connected; a timeout as is."""
    text = str(exc)
    if isinstance(exc, openai.APITimeoutError):
        return text
    large = too_large(exc)
    if large is not None:
        return f"{large} (the read stopped there)"
    cause = connect_failure(exc)
    if cause is None:
        chain = _chain(exc)
        if len(chain) < 2:
            return text
        root = chain[-1]
        cause = f"connection dropped: {str(root) or type(root).__name__}"
    return f"{text} ({cause})"


@dataclass(eq=False)
class Ticket:
    """One request in flight: when sent, its deadline, whether the server answered since."""

    sent: float
    bound: asyncio.Timeout | None = None
    progressed: bool = False
    head_deadline: float | None = None


class InFlight:
    """The bound on requests in flight, halved when one times out while the server answered
    another; a request behind others is cut at `timeout` only once it is the oldest (`Ticket`)."""

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
        self.last_answer = 0.0
        self.lowered_at = float("-inf")
        self.timeout = timeout  # with it, deadlines follow the server's queue
        self.tickets: list[Ticket] = []
        self.answers: list[float] = []  # when the answers of the last `timeout` came
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
        served = max(1, len(self.answers))
        current = self.limit if self.limit is not None else self.peak
        if ticket is not None and now - ticket.sent > self.timeout and served < current:
            self._lower(  # answered after `timeout` queued: bound to the last `timeout`'s answers
                served,
                now,
                f"the server queues requests and answers about {served} per --timeout: this "
                f"run now keeps at most {served} in flight (start with --concurrency {served} "
                "to skip this)",
            )
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
        """When `ticket`'s request is cut (`clock` time; None: not while older ones wait)."""
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

    def timed_out(self, sent_at: float) -> bool:
        """A request sent at `sent_at` timed out; True when that lowered the bound (the server
        answered another meanwhile, and the request was not in the burst that lowered it last)."""
        if self.last_answer <= sent_at or sent_at <= self.lowered_at:
            return False
        current = self.limit if self.limit is not None else self.peak
        lowered = max(1, current // 2)
        if self.limit is not None and lowered >= self.limit:
            return False
        self._lower(
            lowered,
            self.clock(),
            f"a request timed out while the server answered others: it queues requests, so "
            f"this run now keeps at most {lowered} in flight (time waiting for a turn here "
            f"does not count against --timeout; start with --concurrency {lowered} to skip "
            "this)",
        )
        return True

    def _lower(self, limit: int, now: float, notice: str) -> None:
        self.limit, self.lowered_at = limit, now
        if self._on_notice is not None:
            self._on_notice(notice)
