"""relgrade's own request function for batch request lines: many in flight, spread over several
servers (least in flight first), each answer a results line in run-batch's shape with its status
and request id. A non-JSON reply, a server error or a dropped connection is an error line for
that request, never an exception that stops the others, never a grade."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import httpx2

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})
ATTEMPTS = 3
"""Tries of a request that got no answer, a 429 or a 5xx (each on the least busy server)."""


class Servers:
    """The servers requests go to: each request to the one with the fewest in flight (the
    first given on a tie), avoiding the one that just failed it when there is another."""

    def __init__(self, base_urls: Sequence[str]) -> None:
        if not base_urls:
            raise ValueError("no server")
        self.urls = [u.rstrip("/") for u in base_urls]
        self.in_flight = [0] * len(self.urls)

    def pick(self, avoid: int | None = None) -> int:
        """The index of the server to send the next request to."""
        choices = [i for i in range(len(self.urls)) if i != avoid] or [0]
        return min(choices, key=lambda i: (self.in_flight[i], i))


def result_line(
    custom_id: str, status: int, body: Any, error: dict[str, str] | None, request_id: str | None
) -> str:
    """One results line in run-batch's shape (`error` in the Batch API's {code, message})."""
    rid = request_id or f"relgrade-{uuid.uuid4().hex}"
    record = {
        "id": f"relgrade-{uuid.uuid4().hex}",
        "custom_id": custom_id,
        "response": {"status_code": status, "request_id": rid, "body": body},
        "error": error,
    }
    return json.dumps(record, ensure_ascii=False)


def reply_line(custom_id: str, reply: httpx2.Response) -> str:
    """The results line of an HTTP reply: its JSON body, or an error line when the body is
    not a JSON object (the first 500 characters of what came, as the message)."""
    rid = reply.headers.get("x-request-id")
    try:
        body = reply.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        return result_line(custom_id, reply.status_code, body, None, rid)
    text = reply.text[:500]
    message = f"HTTP {reply.status_code}: the reply is not a JSON object: {text!r}"
    code = "invalid_reply" if reply.status_code == 200 else f"http_{reply.status_code}"
    return result_line(custom_id, reply.status_code, None, {"code": code, "message": message}, rid)


class Requester:
    """Sends request lines' bodies with at most `limit` in flight, over `servers`."""

    def __init__(
        self,
        servers: Servers,
        limit: int,
        *,
        timeout_s: float = 600.0,
        on_send: Callable[[str, int], None] | None = None,
    ) -> None:
        self.servers = servers
        self.limit = asyncio.Semaphore(limit)
        limits = httpx2.Limits(max_connections=limit, max_keepalive_connections=limit)
        self.client = httpx2.AsyncClient(timeout=timeout_s, limits=limits)
        self.on_send = on_send

    async def aclose(self) -> None:
        await self.client.aclose()

    async def answer_all(self, raw_lines: Sequence[str]) -> list[str]:
        """The results line of each request line, in order; all sent concurrently."""
        return list(await asyncio.gather(*(self.answer(raw) for raw in raw_lines)))

    async def answer(self, raw: str) -> str:
        """The results line of one request line (an error line when it cannot be answered)."""
        try:
            request = json.loads(raw)
            custom_id = str(request["custom_id"])
            body = request["body"]
            path = str(request.get("url") or "/v1/chat/completions")
        except (ValueError, KeyError, TypeError):
            return ""  # not a request line: nothing to answer (import never asked it)
        async with self.limit:
            return await self._send(custom_id, path, body)

    async def _send(self, custom_id: str, path: str, body: Any) -> str:
        route = path.removeprefix("/v1")
        failed: int | None = None
        line = ""
        for attempt in range(ATTEMPTS):
            i = self.servers.pick(avoid=failed)
            self.servers.in_flight[i] += 1
            if self.on_send is not None:
                self.on_send(custom_id, i)
            try:
                reply = await self.client.post(self.servers.urls[i] + route, json=body)
            except httpx2.HTTPError as exc:
                message = f"{type(exc).__name__}: {exc}"[:500]
                error = {"code": "connection_error", "message": message}
                line = result_line(custom_id, 0, None, error, None)
                failed = i
            else:
                line = reply_line(custom_id, reply)
                if reply.status_code not in RETRY_STATUSES:
                    return line
                failed = i
            finally:
                self.servers.in_flight[i] -= 1
            if attempt + 1 < ATTEMPTS:
                await asyncio.sleep(0.5 * 2**attempt)
        return line
