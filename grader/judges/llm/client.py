"""The SDK client a judge sends with: which API key goes to which server, a deadline on each whole
request (connect to last byte; uploads and downloads get time in proportion to their size) and a
bound on the reply's size.

A key given explicitly goes anywhere. `OPENAI_API_KEY` goes to any server except one on this machine
(however its address is spelled). No key: an error for OpenAI's own endpoint, `PLACEHOLDER_KEY` for
any other server.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import socket
import threading
from collections.abc import Sequence
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
    """The addresses the system resolver gives for `host` within RESOLVE_S seconds (or none)."""
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
