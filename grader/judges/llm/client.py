"""The SDK client a judge sends with: a deadline on each whole request (connect to last byte;
uploads and downloads get time in proportion to their size) and a bound on the reply's size.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Sequence
from typing import Any

import httpx2
import openai

from grader.judges.llm.endpoint import (
    BASE_URL_ENV,
    KEY_ENV,
    PLACEHOLDER_KEY,
    api_key_for,
    env_key_for,
)
from grader.redact import url_secrets

MiB = 1 << 20

UPLOAD_BYTES_PER_S = MiB
"""The slowest upload rate a request's deadline allows for."""
DOWNLOAD_BYTES_PER_S = 256 * 1024
"""Bytes of a download that earn it one more second past its deadline."""
DEFAULT_DEADLINE_S = 600.0
MAX_REPLY_ENV = "RELGRADE_MAX_REPLY_BYTES"


class ReplyTooLarge(httpx2.RequestError):
    """A reply body past its bound; the read stopped there."""


REPLY_BYTES = 8 * MiB
REPLY_CAPS = {"/models": MiB, "/content": 4096 * MiB}
"""Bytes a reply body may hold (after decompression) by its path's end; any other: `max_reply`."""


class BoundedHTTPClient(openai.DefaultAsyncHttpxClient):
    """The SDK's default HTTP client with a whole-request deadline and a reply bound."""

    def __init__(self, *, max_reply: int = REPLY_BYTES, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_reply = max_reply

    async def send(
        self, request: httpx2.Request, *, stream: bool = False, **kwargs: Any
    ) -> httpx2.Response:
        # the request's timeout, plus one second per MiB it uploads
        timeout: Any = request.extensions.get("timeout") or {}
        seconds = timeout.get("read") if isinstance(timeout, dict) else None
        seconds = float(seconds) if seconds is not None else DEFAULT_DEADLINE_S
        with contextlib.suppress(ValueError):
            seconds += int(request.headers.get("content-length") or 0) / UPLOAD_BYTES_PER_S
        path = request.url.path
        cap = next((cap for end, cap in REPLY_CAPS.items() if path.endswith(end)), self.max_reply)
        grows = path.endswith("/content")
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


def make_clients(
    base_url: str | Sequence[str] | None,
    api_key: str | Sequence[str | None] | None,
    client: openai.AsyncOpenAI | None,
    timeout: float,
    max_reply_bytes: int | None,
) -> list[tuple[openai.AsyncOpenAI, tuple[str, ...]]]:
    """One client per server (or the caller's), with its secrets: a key per URL, or one for all."""
    urls = [base_url] if base_url is None or isinstance(base_url, str) else list(base_url)
    keys: list[str | None] = (
        list(api_key) if isinstance(api_key, list | tuple) else [api_key] * len(urls)  # type: ignore[list-item]
    )
    if not urls or len(keys) != len(urls) or (client is not None and len(urls) > 1):
        raise ValueError("give one api_key per base_url, and a client only with one server")
    if max_reply_bytes is None:
        max_reply_bytes = REPLY_BYTES
        with contextlib.suppress(ValueError):
            max_reply_bytes = int(os.environ.get(MAX_REPLY_ENV) or REPLY_BYTES)
    made = []
    for given_url, given_key in zip(urls, keys, strict=True):
        url = given_url or os.environ.get(BASE_URL_ENV) or None
        key = given_key if given_key is not None else env_key_for(url, os.environ.get(KEY_ENV))
        if client is None:
            key = api_key_for(url, key)  # a server other than OpenAI's may need no key
            made_client = openai.AsyncOpenAI(
                api_key=key,
                base_url=url,
                timeout=timeout,
                max_retries=0,
                http_client=BoundedHTTPClient(max_reply=max_reply_bytes),
            )
        else:
            made_client = client.with_options(max_retries=0, timeout=timeout)
            key = key or getattr(client, "api_key", None)
        secrets = tuple(
            s
            for s in (key, getattr(made_client, "api_key", None))
            if s and len(s) >= 4 and s != PLACEHOLDER_KEY
        ) + url_secrets(str(made_client.base_url))
        made.append((made_client, secrets))
    return made
