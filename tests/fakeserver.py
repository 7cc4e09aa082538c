"""A fake OpenAI-compatible server on a real socket, for tests and benchmarks.

It answers `POST /v1/chat/completions` like OpenAI does: a valid grade by default (deterministic
from the request text) in the output mode the request asked for (json_schema, json_object, or
plain text ending in `Grade: N`), with usage and, when asked, logprobs of the grade token. Tests
script faults with `enqueue()`: each incoming request takes the next fault from the queue (FIFO),
then the default reply resumes.

    with FakeServer() as server:                      # background thread, random port
        server.enqueue(faults.rate_limited(retry_after="0"), faults.server_error(503))
        client = AsyncOpenAI(base_url=server.base_url, api_key="sk-test", max_retries=0)
        ...
        assert server.counts["requests"] == 3
        server.requests[-1]                           # the JSON body of the last request

Persistent behaviour (like a vLLM or Ollama server that never supports json_schema) is set with
`server.reject_formats = {"json_schema"}`. Other routes (e.g. /v1/files, /v1/batches) are added
with `server.add_route(path, endpoint, methods)` (Starlette endpoints). For benchmarks it runs as
its own process so it does not share the client's GIL:

    python -m tests.fakeserver --port 0 --latency-ms 100     # prints: FAKESERVER <base_url>
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import hashlib
import json
import logging
import math
import re
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

CHAT_PATH = "/v1/chat/completions"
GRADE_TOKENS = ("0", "1", "2", "3")

ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
Endpoint = Callable[[Request], Awaitable[Response]]


# ---------------------------------------------------------------------------------------------
# Faults


@dataclass(frozen=True)
class Fault:
    """One scripted misbehaviour, consumed by one request. Build them with the functions below."""

    kind: str
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    delay_s: float = 0.0
    content: str | None = None
    grade: int | None = None
    refusal: str | None = None
    finish_reason: str = "stop"


class faults:
    """Constructors for every fault the judge must survive."""

    @staticmethod
    def rate_limited(retry_after: str | None = "1", *, retry_after_ms: str | None = None) -> Fault:
        headers = {}
        if retry_after is not None:
            headers["retry-after"] = retry_after
        if retry_after_ms is not None:
            headers["retry-after-ms"] = retry_after_ms
        return faults.error(429, "Rate limit reached for requests", "rate_limit_exceeded", headers)

    @staticmethod
    def server_error(status: int = 500) -> Fault:
        return faults.error(status, f"The server had an error ({status})", None)

    @staticmethod
    def error(
        status: int,
        message: str,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Fault:
        """Any HTTP error with an OpenAI-style error body (e.g. 401, 404)."""
        body = {"error": {"message": message, "type": "error", "param": None, "code": code}}
        return Fault("status", status=status, headers=headers or {}, body=body)

    @staticmethod
    def reject_response_format(kind: str = "json_schema") -> Fault:
        """The 400 that vLLM/Ollama-style servers send for an unsupported response_format."""
        message = f"Invalid value for 'response_format': {kind} is not supported by this server"
        return faults.error(400, message, "invalid_response_format")

    @staticmethod
    def slow(seconds: float) -> Fault:
        """A valid reply, but only after `seconds` (past the client's timeout)."""
        return Fault("slow", delay_s=seconds)

    @staticmethod
    def drop() -> Fault:
        """Close the socket without any reply."""
        return Fault("drop")

    @staticmethod
    def not_json_body() -> Fault:
        """A 200 whose body is an HTML page, not JSON."""
        return Fault("not_json_body", body="<html><body>502 Bad Gateway</body></html>")

    @staticmethod
    def content(text: str, *, finish_reason: str = "stop") -> Fault:
        """A well-formed completion whose message content is exactly `text`."""
        return Fault("content", content=text, finish_reason=finish_reason)

    @staticmethod
    def malformed_json() -> Fault:
        return Fault("malformed_json", content="{'reason': 'single quotes', grade: 2")

    @staticmethod
    def bad_grade(grade: int = 7) -> Fault:
        """A well-formed reply (in the asked mode) whose grade is outside 0..3."""
        return Fault("bad_grade", grade=grade)

    @staticmethod
    def grade(grade: int) -> Fault:
        """A valid reply with this grade (overrides the deterministic default once)."""
        return Fault("grade", grade=grade)

    @staticmethod
    def truncated() -> Fault:
        """finish_reason "length" with the content cut in the middle."""
        return Fault("truncated", finish_reason="length")

    @staticmethod
    def refusal(text: str = "I'm sorry, but I can't help with that request.") -> Fault:
        return Fault("refusal", refusal=text)


# ---------------------------------------------------------------------------------------------
# The default responder (pure functions, reusable by a fake Batch API)


def request_text(body: dict[str, Any]) -> str:
    """All message text of a chat request, concatenated (what the default grade hashes)."""
    parts: list[str] = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "\n".join(parts)


def default_grade(body: dict[str, Any]) -> int:
    """A grade that depends only on the request's first user message (stable across re-asks)."""
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    text = str(users[0].get("content", "")) if users else request_text(body)
    return hashlib.sha256(text.encode("utf-8")).digest()[0] % 4


def output_mode(body: dict[str, Any]) -> str:
    """ "json_schema", "json_object" or "text", from the request's response_format."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") in ("json_schema", "json_object"):
        return str(fmt["type"])
    return "text"


def reply_content(mode: str, grade: int, reason: str = "Scripted by the fake server.") -> str:
    """The message content a well-behaved model would send for `grade` in `mode`."""
    if mode == "text":
        return f"{reason}\nGrade: {grade}"
    return json.dumps({"reason": reason, "grade": grade})


def grade_probabilities(grade: int) -> dict[str, float]:
    """Top alternatives of the grade token: the chosen grade most likely, then its neighbours,
    plus one non-grade token (which a client must ignore when renormalising)."""
    probs = {str(g): 0.02 for g in range(4)}
    probs[str(grade)] = 0.8
    for near in (grade - 1, grade + 1):
        if 0 <= near <= 3:
            probs[str(near)] = 0.07
    probs['"'] = 0.01
    return probs


def _token(text: str, logprob: float, top: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "token": text,
        "logprob": logprob,
        "bytes": list(text.encode("utf-8")),
        "top_logprobs": top or [],
    }


def logprobs_for(content: str, grade_offset: int | None, top_n: int) -> dict[str, Any]:
    """Logprobs content: the text split around the grade digit, the digit with `top_n`
    alternatives. Without a grade digit, one token for the whole text."""
    if grade_offset is None:
        return {"content": [_token(content, -0.1)], "refusal": None}
    digit = content[grade_offset]
    probs = grade_probabilities(int(digit)) if digit in GRADE_TOKENS else {digit: 0.9}
    ranked = sorted(probs.items(), key=lambda kv: -kv[1])[: max(top_n, 1)]
    top = [_token(tok, math.log(p)) for tok, p in ranked]
    tokens = []
    if grade_offset > 0:
        tokens.append(_token(content[:grade_offset], -0.05))
    tokens.append(_token(digit, math.log(probs[digit]), top if top_n > 0 else []))
    if grade_offset + 1 < len(content):
        tokens.append(_token(content[grade_offset + 1 :], -0.05))
    return {"content": tokens, "refusal": None}


def _grade_offset(content: str, mode: str) -> int | None:
    pattern = r"Grade:\s*(\d)" if mode == "text" else r'"grade"\s*:\s*(\d)'
    found = list(re.finditer(pattern, content))
    return found[-1].start(1) if found else None


def completion(
    body: dict[str, Any],
    *,
    content: str | None,
    finish_reason: str = "stop",
    refusal: str | None = None,
    cached_tokens: int = 0,
    with_logprobs: bool = True,
) -> dict[str, Any]:
    """A full chat.completion body around `content`, with usage and (when asked) logprobs."""
    mode = output_mode(body)
    prompt_tokens = max(1, len(request_text(body)) // 4)
    completion_tokens = max(1, len(content or refusal or "") // 4)
    logprobs = None
    if body.get("logprobs") and with_logprobs and content is not None:
        logprobs = logprobs_for(
            content, _grade_offset(content, mode), int(body.get("top_logprobs") or 0)
        )
    return {
        "id": "chatcmpl-" + hashlib.sha1(os_random()).hexdigest()[:24],
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake-model"),
        "system_fingerprint": "fp_fake",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": content,
                    "refusal": refusal,
                    "annotations": [],
                },
                "logprobs": logprobs,
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "prompt_tokens_details": {
                "cached_tokens": min(cached_tokens, prompt_tokens),
                "audio_tokens": 0,
            },
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        },
    }


_counter = iter(range(1, 1 << 62))
_counter_lock = threading.Lock()


def os_random() -> bytes:
    """Unique bytes per call (ids need only be distinct, not secret)."""
    with _counter_lock:
        return f"{time.time_ns()}-{next(_counter)}".encode()


# ---------------------------------------------------------------------------------------------
# The server


class FakeServer:
    """The fake OpenAI-compatible server; see the module docstring."""

    def __init__(
        self,
        *,
        latency_ms: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
        routes: Iterable[Route] = (),
    ) -> None:
        self.latency_ms = latency_ms
        self.host = host
        self.port = port
        self.reject_formats: set[str] = set()
        """response_format types answered with a 400 on every request (e.g. {"json_schema"})."""
        self.logprobs = True
        """Whether logprobs are returned when a request asks for them."""
        self.cached_tokens = 0
        self.grade_fn: Callable[[dict[str, Any]], int] = default_grade
        self.reason = "Scripted by the fake server."
        self.requests: list[dict[str, Any]] = []
        """JSON bodies of every chat completion request, in arrival order (faulted ones too)."""
        self.headers: list[dict[str, str]] = []
        """Headers of those requests, same order."""
        self.counts: collections.Counter[str] = collections.Counter()
        """`requests` plus one count per outcome: `ok`, or the fault kind (`status:429`, ...)."""
        self.state: dict[str, Any] = {}
        """Free storage for mounted routes (e.g. a fake Batch API's files and batches)."""
        self._faults: collections.deque[Fault] = collections.deque()
        self._lock = threading.Lock()
        self._extra = Starlette(routes=list(routes))
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self._stopping: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- scripting -------------------------------------------------------------------------

    def enqueue(self, *items: Fault) -> None:
        """Queue faults; each request consumes the next one, in order."""
        self._faults.extend(items)

    @property
    def pending_faults(self) -> int:
        return len(self._faults)

    def reset(self) -> None:
        """Forget history, counters and queued faults (settings are kept)."""
        with self._lock:
            self.requests.clear()
            self.headers.clear()
            self.counts.clear()
        self._faults.clear()

    def add_route(self, path: str, endpoint: Endpoint, methods: list[str] | None = None) -> None:
        """Serve another path (a Starlette endpoint), e.g. `/v1/files` for a fake Batch API."""
        self._extra.router.routes.append(Route(path, endpoint, methods=methods))

    def completion_for(self, body: dict[str, Any]) -> dict[str, Any]:
        """The default (fault-free) chat.completion body for a request body."""
        grade = self.grade_fn(body)
        content = reply_content(output_mode(body), grade, self.reason)
        return completion(
            body, content=content, cached_tokens=self.cached_tokens, with_logprobs=self.logprobs
        )

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT/v1`, the value for AsyncOpenAI(base_url=...)."""
        return f"http://{self.host}:{self.port}/v1"

    def _config(self) -> uvicorn.Config:
        # A dropped connection is the point of the `drop` fault, not an error worth a log line.
        logging.getLogger("uvicorn.error").setLevel(logging.CRITICAL)
        return uvicorn.Config(
            self._asgi,
            log_config=None,
            log_level="warning",
            access_log=False,
            proxy_headers=False,
            lifespan="off",
            interface="asgi3",
            timeout_graceful_shutdown=1,
            timeout_keep_alive=30,
        )

    def _bind(self) -> socket.socket:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self.port))
        sock.listen(2048)
        self.port = sock.getsockname()[1]
        return sock

    def start(self) -> FakeServer:
        """Serve in a daemon thread; returns once the socket accepts connections."""
        self._socket = self._bind()
        self._server = uvicorn.Server(self._config())
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("fake server failed to start")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Stop serving; slow replies still sleeping are woken and abandoned."""
        if self._server is None:
            return
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()
        self._server = None

    def serve_forever(self) -> None:
        """Serve in this thread (the subprocess mode)."""
        self._socket = self._bind()
        self._server = uvicorn.Server(self._config())
        print(f"FAKESERVER {self.base_url}", flush=True)
        self._server.run(sockets=[self._socket])

    def __enter__(self) -> FakeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- ASGI ------------------------------------------------------------------------------

    async def _asgi(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == CHAT_PATH and scope["method"] == "POST":
            await self._chat(scope, receive, send)
        elif scope["type"] == "http" and scope["path"] == "/v1/models":
            await _send(send, 200, {"object": "list", "data": [{"id": "fake-model"}]})
        else:
            await self._extra(scope, receive, send)

    async def _sleep(self, seconds: float) -> None:
        if self._stopping is None:
            self._loop = asyncio.get_running_loop()
            self._stopping = asyncio.Event()
        if seconds > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), seconds)

    async def _chat(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        raw = b""
        while True:
            message = await receive()
            raw += message.get("body", b"")
            if not message.get("more_body"):
                break
        try:
            body = json.loads(raw)
        except ValueError:
            await _send(send, 400, {"error": {"message": "request body is not JSON"}})
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        fault = self._faults.popleft() if self._faults else None
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            self.counts["requests"] += 1
        await self._sleep(self.latency_ms / 1000.0)
        mode = output_mode(body)
        if fault is None and mode in self.reject_formats:
            fault = faults.reject_response_format(mode)
        if fault is None:
            self._count("ok")
            await _send(send, 200, self.completion_for(body))
            return
        self._count(fault.kind if fault.kind != "status" else f"status:{fault.status}")
        await self._apply(fault, body, send)

    def _count(self, outcome: str) -> None:
        with self._lock:
            self.counts[outcome] += 1

    async def _apply(self, fault: Fault, body: dict[str, Any], send: Any) -> None:
        mode = output_mode(body)
        if fault.kind == "status":
            await _send(send, fault.status, fault.body, fault.headers)
        elif fault.kind == "drop":
            transport = getattr(getattr(send, "__self__", None), "transport", None)
            if transport is None:
                raise RuntimeError("cannot reach the socket to drop it")
            transport.close()
        elif fault.kind == "slow":
            await self._sleep(fault.delay_s)
            await _send(send, 200, self.completion_for(body))
        elif fault.kind == "not_json_body":
            await _send_raw(send, 200, str(fault.body).encode(), "text/html")
        elif fault.kind == "refusal":
            reply = completion(body, content=None, refusal=fault.refusal)
            await _send(send, 200, reply)
        elif fault.kind in ("content", "malformed_json"):
            reply = completion(
                body,
                content=fault.content,
                finish_reason=fault.finish_reason,
                cached_tokens=self.cached_tokens,
                with_logprobs=self.logprobs,
            )
            await _send(send, 200, reply)
        elif fault.kind in ("bad_grade", "grade"):
            assert fault.grade is not None
            content = reply_content(mode, fault.grade, self.reason)
            reply = completion(
                body, content=content, cached_tokens=self.cached_tokens, with_logprobs=self.logprobs
            )
            await _send(send, 200, reply)
        elif fault.kind == "truncated":
            full = reply_content(mode, self.grade_fn(body), self.reason * 3)
            cut = full[: max(1, len(full) // 2)]
            reply = completion(body, content=cut, finish_reason="length")
            await _send(send, 200, reply)
        else:  # pragma: no cover - a typo in a test
            raise ValueError(f"unknown fault kind {fault.kind!r}")


async def _send(
    send: Any, status: int, payload: Any, headers: dict[str, str] | None = None
) -> None:
    await _send_raw(send, status, json.dumps(payload).encode(), "application/json", headers)


async def _send_raw(
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Fake OpenAI-compatible server (tests/bench).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument(
        "--reject",
        action="append",
        default=[],
        choices=["json_schema", "json_object"],
        help="answer 400 to this response_format type (repeatable)",
    )
    parser.add_argument("--no-logprobs", action="store_true")
    args = parser.parse_args(argv)
    server = FakeServer(latency_ms=args.latency_ms, host=args.host, port=args.port)
    server.reject_formats = set(args.reject)
    server.logprobs = not args.no_logprobs
    server.serve_forever()


if __name__ == "__main__":
    main()
