"""The fake server's faults on the wire: bytes trickled (in the body or in the headers), a body
that never ends, and a server that serves one request at a time.

Each takes the ASGI `send`, the server's `sleep` (woken when it stops) and `stopped` (whether it
stopped), and returns when the client hangs up or the server stops; `counts` (the server's
counter) gets `hung_up` when the client closed the connection first.
"""

from __future__ import annotations

import asyncio
import collections
import json
from collections.abc import Awaitable, Callable
from typing import Any

Sleep = Callable[[float], Awaitable[None]]
Stopped = Callable[[], bool]

ENDLESS_CHUNK = b" " * 65536
"""What an endless body repeats: whitespace, so that only its size is wrong."""


def _transport(send: Any) -> Any:
    return getattr(getattr(send, "__self__", None), "transport", None)


def _gone(send: Any, stopped: Stopped, counts: collections.Counter[str]) -> bool:
    transport = _transport(send)
    if transport is not None and transport.is_closing():
        counts["hung_up"] += 1
        return True
    return stopped()


async def trickle(
    send: Any,
    payload: Any,
    interval_s: float,
    sleep: Sleep,
    stopped: Stopped,
    counts: collections.Counter[str],
) -> None:
    """A 200 with `payload`, its body sent one byte every `interval_s`."""
    data = json.dumps(payload).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(data)).encode()),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    for i in range(len(data)):
        await sleep(interval_s)
        if _gone(send, stopped, counts):
            return
        more = i < len(data) - 1
        await send({"type": "http.response.body", "body": data[i : i + 1], "more_body": more})


async def trickle_headers(
    send: Any, interval_s: float, sleep: Sleep, stopped: Stopped, counts: collections.Counter[str]
) -> None:
    """A status line and headers that never end: one byte every `interval_s`, written to the
    socket under the ASGI server (which would send headers at once)."""
    transport = _transport(send)
    if transport is None:
        raise RuntimeError("cannot reach the socket to trickle headers")
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-filler: "
    i = 0
    while True:
        transport.write(head[i : i + 1] if i < len(head) else b"a")
        i += 1
        await sleep(interval_s)
        if _gone(send, stopped, counts):
            return


async def endless_body(send: Any, stopped: Stopped, counts: collections.Counter[str]) -> None:
    """A 200 whose body (chunked, no length) never ends."""
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b'{"choices": [', "more_body": True})
    while not _gone(send, stopped, counts):
        counts["endless_bytes"] += len(ENDLESS_CHUNK)
        await send({"type": "http.response.body", "body": ENDLESS_CHUNK, "more_body": True})


async def send_json(
    send: Any, status: int, payload: Any, headers: dict[str, str] | None = None
) -> None:
    await send_raw(send, status, json.dumps(payload).encode(), "application/json", headers)


async def send_raw(
    send: Any,
    status: int,
    data: bytes,
    content_type: str,
    headers: dict[str, str] | None = None,
) -> None:
    raw_headers = [
        (b"content-type", content_type.encode()),
        (b"content-length", str(len(data)).encode()),
    ]
    raw_headers += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": data})


async def client_gone(receive: Any) -> bool:
    """Whether the client has disconnected (its request body was read whole before)."""
    try:
        message = await asyncio.wait_for(receive(), timeout=0.001)
    except TimeoutError:
        return False
    return bool(message.get("type") == "http.disconnect")
