"""The SDK client a judge sends with: which key goes to which server, and an HTTP client that
bounds each whole request in time and its reply in size.

A key given explicitly goes anywhere; `OPENAI_API_KEY` goes to any server except one on this
machine (however its address is spelled); no key is an error for OpenAI's own endpoint and
`PLACEHOLDER_KEY` for any other. The SDK's own retries are off: the judge's retry loop is the only
one. The deadline covers connect, send, headers and the whole body (an overrun is a timeout); a
reply past `ReplyLimits` fails with `ReplyTooLarge`; uploads and downloads get time in proportion
to their size.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import socket
import threading
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

import httpx2
import openai

from grader.errors import JudgeError
from grader.redact import url_secrets

KEY_ENV = "OPENAI_API_KEY"
BASE_URL_ENV = "OPENAI_BASE_URL"
PLACEHOLDER_KEY = "no-key-needed"
"""The one key sent to a server that needs none (the SDK insists on some key)."""
OPENAI_HOST = "api.openai.com"


def host_of(base_url: str | None) -> str:
    """The host name of `base_url`, lower case ("" when there is none)."""
    return (urlparse(base_url).hostname or "").lower() if base_url else ""


def is_openai(base_url: str | None) -> bool:
    """Whether requests to `base_url` go to OpenAI's own API (None: the SDK's default, OpenAI)."""
    return base_url is None or host_of(base_url) == OPENAI_HOST


def host_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address the client connects to for a numeric `host`, however spelled (`127.1`,
    `0x7f000001`: `inet_aton`'s forms; IPv4-mapped IPv6 as IPv4); None for a name."""
    host = host.strip("[]")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except (OSError, ValueError):
            return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


RESOLVE_S = 2.0


def resolved(host: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """The addresses the system resolver gives for `host` within RESOLVE_S seconds (none when
    it fails or takes longer)."""
    found: list[ipaddress.IPv4Address | ipaddress.IPv6Address] = []

    def look_up() -> None:
        with contextlib.suppress(OSError, UnicodeError, ValueError):
            for *_, sockaddr in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP):
                address = host_address(str(sockaddr[0]).split("%")[0])
                if address is not None:
                    found.append(address)

    worker = threading.Thread(target=look_up, name="relgrade-resolve", daemon=True)
    worker.start()
    worker.join(RESOLVE_S)
    return [] if worker.is_alive() else found


def is_loopback(base_url: str | None) -> bool:
    """Whether `base_url` is a server on this machine (localhost, 127.0.0.0/8, ::1, 0.0.0.0)."""
    host = host_of(base_url).rstrip(".")
    if not host:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    address = host_address(host)
    addresses = [address] if address is not None else resolved(host)
    return any(a.is_loopback or a.is_unspecified for a in addresses)


def env_key_for(base_url: str | None, environ_key: str | None) -> str | None:
    """`environ_key` (the value of OPENAI_API_KEY) if it may go to `base_url`: not to loopback."""
    return None if is_loopback(base_url) else (environ_key or None)


def api_key_for(base_url: str | None, key: str | None, *, sending: bool = True) -> str:
    """The key to send to `base_url` (module docstring); a dry run (`sending=False`) needs none."""
    if key:
        return key
    if sending and is_openai(base_url):
        where = base_url or "https://api.openai.com/v1"
        raise JudgeError(f"no API key for {where}: set the {KEY_ENV} environment variable")
    return PLACEHOLDER_KEY


MiB = 1 << 20

UPLOAD_BYTES_PER_S = MiB
"""The slowest upload rate a request's deadline allows for."""
DOWNLOAD_BYTES_PER_S = 256 * 1024
"""Bytes of a download that earn it one more second past its deadline."""
DEFAULT_DEADLINE_S = 600.0
MAX_REPLY_ENV = "RELGRADE_MAX_REPLY_BYTES"


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
    """Bytes a reply body may hold, by kind of request (after decompression): a chat
    completion, `GET /v1/models`, a Batch API file download, anything else."""

    chat: int = 8 * MiB
    models: int = 1 * MiB
    download: int = 4096 * MiB
    other: int = 8 * MiB

    def for_path(self, path: str) -> int:
        if path.endswith("/chat/completions"):
            return self.chat
        if path.endswith("/models"):
            return self.models
        if path.endswith("/content"):
            return self.download
        return self.other


def request_deadline(request: httpx2.Request) -> float:
    """Seconds the whole request may take: its timeout, plus one second per MiB it uploads."""
    timeout: Any = request.extensions.get("timeout") or {}
    seconds = timeout.get("read") if isinstance(timeout, dict) else None
    base = float(seconds) if seconds is not None else DEFAULT_DEADLINE_S
    try:
        size = int(request.headers.get("content-length") or 0)
    except ValueError:
        size = 0
    return base + size / UPLOAD_BYTES_PER_S


class BoundedHTTPClient(openai.DefaultAsyncHttpxClient):
    """The SDK's default HTTP client with a whole-request deadline and a reply bound."""

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


def make_client(
    *,
    base_url: str | None,
    api_key: str | None,
    client: openai.AsyncOpenAI | None,
    timeout: float,
    limits: ReplyLimits | None = None,
) -> tuple[openai.AsyncOpenAI, tuple[str, ...]]:
    """The client for `base_url` with `api_key`, or `client` with the judge's options; and the
    keys to redact (a caller's client's key too)."""
    url = base_url or os.environ.get(BASE_URL_ENV) or None
    key = api_key if api_key is not None else env_key_for(url, os.environ.get(KEY_ENV))
    if client is None:
        key = api_key_for(url, key)  # a server other than OpenAI's may need no key
        client = openai.AsyncOpenAI(
            api_key=key,
            base_url=url,
            timeout=timeout,
            max_retries=0,
            http_client=BoundedHTTPClient(limits=limits),
        )
    else:
        client = client.with_options(max_retries=0, timeout=timeout)
        key = key or getattr(client, "api_key", None)
    secrets = tuple(
        s
        for s in (key, getattr(client, "api_key", None))
        if s and len(s) >= 4 and s != PLACEHOLDER_KEY
    ) + url_secrets(str(client.base_url))
    return client, secrets
