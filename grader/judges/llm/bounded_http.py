"""The HTTP client every request to a server goes through: a deadline on the whole request and a
bound on the size of its reply.

The deadline covers connect, send, headers and the full body (an overrun is a timeout the SDK
retries); a reply past `ReplyLimits` fails with `ReplyTooLarge`. Uploads and downloads get time in
proportion to their size, never unbounded.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Any

import httpx2
import openai

MiB = 1 << 20

UPLOAD_BYTES_PER_S = MiB
"""The slowest upload rate a request's deadline allows for (1 MiB/s)."""
DOWNLOAD_BYTES_PER_S = 256 * 1024
"""Bytes of a download that earn it one more second past its deadline (256 KiB/s)."""
DEFAULT_DEADLINE_S = 600.0
"""The deadline of a request that carries no timeout of its own."""


MAX_REPLY_ENV = "RELGRADE_MAX_REPLY_BYTES"
"""The environment variable that sets the bound on a chat reply (bytes) when the judge is given
none."""


def chat_reply_limit(given: int | None = None) -> int:
    """The bound on a chat reply: `given`, else `RELGRADE_MAX_REPLY_BYTES`, else 8 MiB."""
    if given is not None:
        return given
    try:
        return int(os.environ.get(MAX_REPLY_ENV) or ReplyLimits.chat)
    except ValueError:
        return ReplyLimits.chat


class ReplyTooLarge(httpx2.RequestError):
    """A reply body past its bound; the read stopped there."""


@dataclass(frozen=True)
class ReplyLimits:
    """Bytes a reply body may hold, by kind of request (after decompression)."""

    chat: int = 8 * MiB
    """A chat completion (a grade and a reason are a few KiB)."""
    models: int = 1 * MiB
    """`GET /v1/models`."""
    download: int = 4096 * MiB
    """A Batch API file download (`/files/ID/content`)."""
    other: int = 8 * MiB
    """Anything else: the Batch API's files and batches objects."""

    def for_path(self, path: str) -> int:
        """The bound for a request to `path`."""
        if path.endswith("/chat/completions"):
            return self.chat
        if path.endswith("/models"):
            return self.models
        if path.endswith("/content"):
            return self.download
        return self.other


def request_deadline(request: httpx2.Request) -> float:
    """Seconds the whole request may take: its timeout (the SDK's, per request), plus one
    second per MiB it uploads."""
    timeout: Any = request.extensions.get("timeout") or {}
    seconds = timeout.get("read") if isinstance(timeout, dict) else None
    base = float(seconds) if seconds is not None else DEFAULT_DEADLINE_S
    try:
        size = int(request.headers.get("content-length") or 0)
    except ValueError:
        size = 0
    return base + size / UPLOAD_BYTES_PER_S


class BoundedHTTPClient(openai.DefaultAsyncHttpxClient):
    """The SDK's default HTTP client with a whole-request deadline and a reply bound (module
    docstring)."""

    def __init__(self, *, limits: ReplyLimits | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.reply_limits = limits or ReplyLimits()

    async def send(
        self, request: httpx2.Request, *, stream: bool = False, **kwargs: Any
    ) -> httpx2.Response:
        seconds = request_deadline(request)
        cap = self.reply_limits.for_path(request.url.path)
        grows = request.url.path.endswith("/content")
        started = asyncio.get_running_loop().time()
        try:
            async with asyncio.timeout(seconds) as bound:
                response = await super().send(request, stream=True, **kwargs)
                if stream:  # the caller reads it; only the headers were bounded here
                    return response
                try:
                    chunks: list[bytes] = []
                    size = 0
                    async for chunk in response.aiter_bytes():
                        size += len(chunk)
                        if size > cap:
                            raise ReplyTooLarge(f"reply larger than {cap} bytes", request=request)
                        chunks.append(chunk)
                        if grows:
                            bound.reschedule(started + seconds + size / DOWNLOAD_BYTES_PER_S)
                finally:
                    await response.aclose()
        except TimeoutError as exc:
            raise httpx2.ReadTimeout(
                f"no complete reply within {seconds:g} s", request=request
            ) from exc
        response._content = b"".join(chunks)  # what `Response.aread` sets
        return response


def bounded_http_client(limits: ReplyLimits | None = None) -> BoundedHTTPClient:
    """A new `BoundedHTTPClient` (the SDK's defaults otherwise)."""
    return BoundedHTTPClient(limits=limits)


def too_large(exc: BaseException) -> ReplyTooLarge | None:
    """The `ReplyTooLarge` in `exc`'s chain, if any."""
    current: BaseException | None = exc
    for _ in range(16):
        if current is None:
            return None
        if isinstance(current, ReplyTooLarge):
            return current
        current = current.__cause__ or current.__context__
    return None
