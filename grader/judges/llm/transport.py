"""Bounds on talking to a server: a deadline for each whole request, what a failed connection
was, and when to give up on the server.

`ServerHealth` declares a server not answering after `threshold` transport failures in a row with
nothing back for `quiet_s`, the same failure to everything, or (sooner) when the first requests all
fail to connect (`connect_failure` reads the cause the SDK's "Connection error." hides); the run
then stops instead of paying every remaining pair's timeouts.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx2
import openai

from grader.errors import ServerNotAnswering
from grader.judges.llm.client import ReplyTooLarge
from grader.redact import redact_url

DEAD_AFTER = 16
"""Transport failures in a row, with no answer between, that mean a server is not answering."""


def dead_after_for(concurrency: int) -> int:
    """The not-answering threshold for `concurrency` workers: max(16, 2 x concurrency)."""
    return max(DEAD_AFTER, 2 * concurrency)


def unreachable_after_for(concurrency: int) -> int:
    """Failures to connect, nothing ever answered, that stop a run at its start: one a worker,
    at least 2."""
    return max(2, concurrency)


@asynccontextmanager
async def deadline(seconds: float | None, method: str, url: str) -> AsyncIterator[asyncio.Timeout]:
    """Bound the whole request inside the block to `seconds` (None: none; the handle can move it);
    an overrun raises `openai.APITimeoutError`."""
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
    """Transport failures in a row with no answer in between (module docstring). Shared by every
    worker of one judge; used from one event loop, so no lock is needed."""

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
        self.unreachable: str | None = None
        """The cause (`connect_failure`'s text) when the server was never reached; else None."""
        self.dropped: str | None = None
        """How a connection was lost before any answer (the server closed it mid-reply), if one
        was: then connections refused afterwards mean a server that stopped, not a wrong address."""
        self.quiet_s = quiet_s
        self.clock = clock
        self.last_answer = clock()
        self.same_for_s = same_for_s
        self.cause: str | None = None
        self.since = 0.0
        self.same = 0
        self.pairs: set[str] = set()
        self.failing: str | None = None
        """The cause (and its last message) when the same failure stopped the run; else None."""

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

    def succeeded(self) -> None:
        """The server gave a good answer (a 200): the same-failure count starts over."""
        self.cause, self.same, self.pairs = None, 0, set()

    def answered(self) -> None:
        """The server sent an HTTP answer (any status): it is there."""
        self.ever_answered = True
        self.last_answer = self.clock()
        if not self.dead:
            self.in_a_row = 0

    def could_not_connect(self, cause: str) -> bool:
        """One more failure to connect (`cause`: `connect_failure`'s text), also counted by
        `failed`; True once the server counts as never reached (module docstring), and dead."""
        if self.ever_answered or self.unreachable_after is None:
            return self.dead
        self.connect_failures += 1
        if self.connect_failures >= self.unreachable_after and not self.dead:
            self.unreachable = cause
            self.dead = True
        return self.dead

    def dropped_before_answer(self, detail: str) -> None:
        """A connection was made, then closed by the server with no reply (`detail`: how)."""
        if not self.ever_answered and self.dropped is None:
            self.dropped = detail

    def failed(self, *, timed_out: bool = False) -> bool:
        """One more timeout or connection failure; True once the server counts as not answering, for
        good (a timeout only after `quiet_s` of quiet too)."""
        self.in_a_row += 1
        quiet = not timed_out or self.clock() - self.last_answer >= self.quiet_s
        if self.in_a_row >= self.threshold and quiet:
            self.dead = True
        return self.dead


def not_answering(
    base_url: str, health: ServerHealth, timeout: float, redact: Callable[[str], str]
) -> ServerNotAnswering:
    """The error that stops a run whose server `health` says is not answering (never reached,
    or `threshold` transport failures in a row), naming its URL and what to check."""
    url = redact_url(base_url).rstrip("/")
    if health.failing is not None:
        return ServerNotAnswering(
            f"{url} keeps failing: the last {health.same} requests, for {len(health.pairs)} "
            f"different pairs, all failed the same way ({redact(health.failing)}), so the run "
            "stopped taking new pairs. The pairs that failed are stored as failed; check the "
            "server, then rerun the same command to retry them and do the rest"
        )
    if health.unreachable is not None and health.dropped is not None:
        return ServerNotAnswering(
            f"{url} stopped answering: the server closed a connection in the middle of a "
            f"request, with no reply ({redact(health.dropped)}), then stopped listening "
            f"(the next {health.unreachable_after} requests could not connect: "
            f"{redact(health.unreachable)}). It probably crashed: see its log. Nothing is "
            "stored as failed. Restart the server, then rerun the same command"
        )
    if health.unreachable is not None:
        return ServerNotAnswering(
            f"{url} is not answering: the first {health.unreachable_after} requests could not "
            f"connect ({redact(health.unreachable)}) and nothing has answered, so the run "
            "stopped at once. Nothing is stored as failed. Check the address (--base-url or "
            "OPENAI_BASE_URL) and that the server is up there, then rerun the same command"
        )
    return ServerNotAnswering(
        f"{url} is not answering: {health.threshold} requests in a row timed out (no complete "
        f"reply within {timeout:g} s) or could not connect, with no answer in between, so the "
        "run stopped. Every answer received is stored; the pairs cut short are not marked "
        "failed. Check that the server is up at that address (--base-url, --timeout), then "
        "rerun the same command to do the rest"
    )


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
    """`label: detail` when `exc` is a failure to connect (label one of `CONNECT_CAUSES`), else
    None (a timeout, a dropped connection, an HTTP answer, anything else)."""
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
