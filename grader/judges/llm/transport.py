"""Bounds on talking to a server: a deadline for each whole request, and when to give up on it.

`--timeout` in the SDK bounds each socket read, so a server that trickles a valid reply one byte
at a time keeps a request open for as long as it likes. `deadline` bounds the whole request
(connect, send, wait, read the full body) and turns an overrun into `openai.APITimeoutError`, so
the one retry policy treats it as any other timeout.

`ServerHealth` counts transport failures (timeouts, refused or dropped connections) in a row with
no answer from the server in between; any HTTP answer (a 5xx included: the server is there)
resets the count. At `threshold` the server is declared not answering, for good: the run stops
instead of paying `attempts x timeout` for every remaining pair. The threshold is
`dead_after_for(concurrency)`: at least 16, and two full rounds of every worker (2 x
concurrency), so that a burst of timeouts on a busy but working server, where all workers wait at
once, does not stop the run.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx2
import openai

DEAD_AFTER = 16
"""Transport failures in a row, with no answer in between, that mean the server is not answering
(at the least; see `dead_after_for`)."""


def dead_after_for(concurrency: int) -> int:
    """The not-answering threshold for `concurrency` workers: max(16, 2 x concurrency)."""
    return max(DEAD_AFTER, 2 * concurrency)


@asynccontextmanager
async def deadline(seconds: float | None, method: str, url: str) -> AsyncIterator[None]:
    """Bound the whole request inside the block to `seconds` (None: no bound); an overrun raises
    `openai.APITimeoutError` (retried as a timeout), with the request's method and URL."""
    try:
        async with asyncio.timeout(seconds):
            yield
    except TimeoutError as exc:
        raise openai.APITimeoutError(request=httpx2.Request(method, url)) from exc


class ServerHealth:
    """Transport failures in a row with no answer in between (module docstring). Shared by every
    worker of one judge; used from one event loop, so no lock is needed."""

    def __init__(self, threshold: int = DEAD_AFTER) -> None:
        if threshold < 1:
            raise ValueError("the not-answering threshold must be at least 1")
        self.threshold = threshold
        self.in_a_row = 0
        self.dead = False

    def answered(self) -> None:
        """The server sent an HTTP answer (any status): it is there."""
        if not self.dead:
            self.in_a_row = 0

    def failed(self) -> bool:
        """One more timeout or connection failure; True once the server counts as not answering
        (and from then on: a late answer does not revive it)."""
        self.in_a_row += 1
        if self.in_a_row >= self.threshold:
            self.dead = True
        return self.dead
