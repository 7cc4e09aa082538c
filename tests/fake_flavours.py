"""Real servers' ways for the fake server (`server.flavour = llama_cpp()`): each is a function of
a request body giving the fault that server answers it with (None: a valid reply).

- `llama_cpp`: llama-cpp-python's server (0.3.x): `response_format` of type json_schema is a
  500 whose message lists the types it takes; `{"type": "json_object", "schema": ...}` is
  taken; a prompt past its context is a 400 with code context_length_exceeded.
- `vllm_guided_only`: a vLLM before structured outputs in `response_format`: json_schema is a
  400, `guided_json` (an extra field) is taken.
- `ollama_native_format`: a server that takes only the `format` field for a schema (Ollama's
  native API's form), refusing json_schema with a 400.
- `QueueingServer`: a fake server answering one request at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from tests.fakeserver import FakeServer
from tests.fakeserver_replies import Fault, faults, request_text

Flavour = Callable[[dict[str, Any]], Fault | None]

LLAMA_CPP_500 = (
    "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
    "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
    "'ctx': {'expected': \"'text' or 'json_object'\"}}\n\n  File \"llama_cpp/server/app.py\", "
    "line 376, in create_chat_completion\n    POST /v1/chat/completions"
)
"""The message llama-cpp-python's server gives a json_schema response_format (with a 500)."""


def _format_type(body: dict[str, Any]) -> str | None:
    fmt = body.get("response_format")
    return str(fmt.get("type")) if isinstance(fmt, dict) else None


def llama_cpp(n_ctx: int | None = None) -> Flavour:
    """llama-cpp-python's server with a context of `n_ctx` tokens (None: no limit), counting a
    token per 4 characters of the request's text."""

    def answer(body: dict[str, Any]) -> Fault | None:
        if _format_type(body) == "json_schema":
            fault = faults.error(500, LLAMA_CPP_500, None)
            fault.body["error"]["type"] = "internal_server_error"
            return fault
        tokens = len(request_text(body)) // 4 + int(body.get("max_tokens") or 0)
        if n_ctx is not None and tokens > n_ctx:
            message = (
                f"This model's maximum context length is {n_ctx} tokens. However, you requested "
                f"{tokens} tokens. Please reduce the length of the messages or completion."
            )
            fault = faults.error(400, message, "context_length_exceeded")
            fault.body["error"]["type"] = "invalid_request_error"
            return fault
        return None

    return answer


def vllm_guided_only(body: dict[str, Any]) -> Fault | None:
    """An older vLLM: no json_schema response_format; guided_json taken."""
    if _format_type(body) == "json_schema":
        return faults.error(400, "response_format json_schema is not supported", None)
    return None


def ollama_native_format(body: dict[str, Any]) -> Fault | None:
    """A server that takes a schema only as the `format` field."""
    if _format_type(body) in ("json_schema", "json_object") and "format" not in body:
        return faults.error(400, "response_format is not supported; use format", None)
    return None


class QueueingServer(FakeServer):
    """A fake server that answers one chat request at a time, as llama.cpp's server with one
    slot does: the others wait in its queue (a request the client gave up on still takes its
    turn)."""

    _turn: asyncio.Lock | None = None

    async def _chat(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if self._turn is None:
            self._turn = asyncio.Lock()
        async with self._turn:
            await super()._chat(scope, receive, send)
