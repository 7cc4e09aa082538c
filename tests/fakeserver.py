"""A fake OpenAI-compatible server on a real socket, for tests and benchmarks.

`POST /v1/chat/completions` answers a valid grade (deterministic from the request text) in the
output mode asked for, with usage and, when asked, logprobs. `enqueue(fault, ...)` scripts the
next requests' faults (FIFO); `reject_formats`, `default_fault`, `models_fault`, `slots` and
`service_s` set lasting behaviour; `add_route` adds other routes (/v1/files, /v1/batches).

    with FakeServer() as server:                      # background thread, random port
        server.enqueue(faults.rate_limited(retry_after="0"), faults.server_error(503))
        ...
        assert server.counts["requests"] == 3

For benchmarks, its own process: `python -m tests.fakeserver --port 0 --latency-ms 100`.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from tests import fakeserver_wire as wire
from tests.fakeserver_replies import (
    GRADE_TOKENS,
    Fault,
    completion,
    default_grade,
    faults,
    grade_probabilities,
    logprobs_for,
    os_random,
    output_mode,
    reply_content,
    request_text,
)
from tests.fakeserver_wire import send_json as _send
from tests.fakeserver_wire import send_raw as _send_raw

__all__ = [
    "GRADE_TOKENS",
    "FakeServer",
    "Fault",
    "completion",
    "default_grade",
    "faults",
    "grade_probabilities",
    "logprobs_for",
    "os_random",
    "output_mode",
    "reply_content",
    "request_text",
]

CHAT_PATH = "/v1/chat/completions"
WIRE_FAULTS = frozenset({"trickle", "trickle_headers", "endless_body"})
MODELS: dict[str, Any] = {"object": "list", "data": [{"id": "fake-model"}]}

Endpoint = Callable[[Request], Awaitable[Response]]


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
        self.default_fault: Fault | None = None
        """The fault of every request that finds the queue empty (None: the valid reply)."""
        self.flavour: Callable[[dict[str, Any]], Fault | None] | None = None
        """A real server's ways (`tests.fake_flavours`): the fault it gives a request, if any."""
        self.logprobs = True
        """Whether logprobs are returned when a request asks for them."""
        self.models: dict[str, Any] = dict(MODELS)
        """The body of `GET /v1/models`."""
        self.models_fault: Fault | None = None
        """A fault on the wire (trickle, trickle_headers, endless_body) for `GET /v1/models`."""
        self.slots: int | None = None
        self.service_s = 0.0
        """`slots` requests served at once, each for `service_s` (None: no queue), like a
        llama.cpp server; abandoned requests are served all the same (`counts["completed"]`)."""
        self._slot: asyncio.Semaphore | None = None
        self.cached_tokens: int | None = 0
        """Cached prompt tokens each reply says (None: the usage leaves them out, as
        llama-cpp-python's server does)."""
        self.grade_fn: Callable[[dict[str, Any]], int] = default_grade
        self.reason = "Scripted by the fake server."
        self.requests: list[dict[str, Any]] = []
        """JSON bodies of every chat completion request, in arrival order (faulted ones too)."""
        self.headers: list[dict[str, str]] = []
        """Headers of those requests, same order."""
        self.counts: collections.Counter[str] = collections.Counter()
        """`requests` plus one count per outcome: `ok`, or the fault kind (`status:429`, ...)."""
        self.answers: collections.Counter[str] = collections.Counter()
        """Of the `ok` replies: `answered` (sent to a live client) and `abandoned` (its client
        had gone before the reply: a killed process)."""
        self.state: dict[str, Any] = {}
        """Free storage for mounted routes (e.g. a fake Batch API's files and batches)."""
        self._faults: collections.deque[Fault] = collections.deque()
        self._hold: tuple[int, threading.Event] | None = None
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

    def hold_replies_after(self, n: int) -> threading.Event:
        """Answer the first `n` chat requests; log later ones but answer them once the event
        returned is set (or at reset): a run cannot finish before the test acts."""
        self._hold = (n, threading.Event())
        return self._hold[1]

    def reset(self) -> None:
        """Forget history, counters, queued faults and held replies (settings are kept)."""
        with self._lock:
            self.requests.clear()
            self.headers.clear()
            self.counts.clear()
            self.answers.clear()
        self._faults.clear()
        held, self._hold = self._hold, None
        if held is not None:
            held[1].set()

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
            if self.models_fault is not None:
                self._count(f"models:{self.models_fault.kind}")
                await self._wire(self.models_fault, send, self.models)
            else:
                await _send(send, 200, self.models)
        else:
            await self._extra(scope, receive, send)

    async def _sleep(self, seconds: float) -> None:
        if self._stopping is None:
            self._loop = asyncio.get_running_loop()
            self._stopping = asyncio.Event()
        if seconds > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), seconds)

    async def _until_stopped(self) -> None:
        await self._sleep(0)  # makes the stopping event
        assert self._stopping is not None
        await self._stopping.wait()

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
        fault = self._faults.popleft() if self._faults else self.default_fault
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            self.counts["requests"] += 1
            number = self.counts["requests"]
        await self._held(number)
        await self._sleep(self.latency_ms / 1000.0)
        await self._served()
        mode = output_mode(body)
        if fault is None and mode in self.reject_formats:
            fault = faults.reject_response_format(mode)
        if fault is None and self.flavour is not None:
            fault = self.flavour(body)
        if fault is None:
            self._count("ok")
            if await wire.client_gone(receive):  # nobody receives this answer
                self._answer("abandoned")
                return
            await _send(send, 200, self.completion_for(body))
            self._answer("answered")
            return
        self._count(fault.kind if fault.kind != "status" else f"status:{fault.status}")
        await self._apply(fault, body, send)

    async def _held(self, number: int) -> None:
        """Wait while request `number` is held (`hold_replies_after`)."""
        hold = self._hold
        while hold and number > hold[0] and not hold[1].is_set() and not self._stopped():
            await self._sleep(0.01)

    async def _wire(self, fault: Fault, send: Any, payload: Any) -> None:
        """A fault on the wire (`tests.fakeserver_wire`)."""
        stopped, counts = self._stopped, self.counts
        if fault.kind == "trickle":
            await wire.trickle(send, payload, fault.delay_s, self._sleep, stopped, counts)
        elif fault.kind == "trickle_headers":
            await wire.trickle_headers(send, fault.delay_s, self._sleep, stopped, counts)
        else:
            await wire.endless_body(send, self._stopped, self.counts)

    async def _served(self) -> None:
        """Wait for the one slot and hold it `service_s` (`slots`); the answer is counted
        `completed` whether or not the client is still there."""
        if self.slots is None:
            return
        if self._slot is None:
            self._slot = asyncio.Semaphore(self.slots)
        async with self._slot:
            await self._sleep(self.service_s)
        self._count("completed")

    def _stopped(self) -> bool:
        return self._stopping is not None and self._stopping.is_set()

    def _count(self, outcome: str) -> None:
        with self._lock:
            self.counts[outcome] += 1

    def _answer(self, outcome: str) -> None:
        with self._lock:
            self.answers[outcome] += 1

    async def _apply(self, fault: Fault, body: dict[str, Any], send: Any) -> None:
        mode = output_mode(body)
        if fault.kind == "status":
            await _send(send, fault.status, fault.body, fault.headers)
        elif fault.kind == "drop":
            transport = getattr(getattr(send, "__self__", None), "transport", None)
            if transport is None:
                raise RuntimeError("cannot reach the socket to drop it")
            transport.close()
        elif fault.kind == "hang":
            await self._until_stopped()
        elif fault.kind in WIRE_FAULTS:
            await self._wire(fault, send, self.completion_for(body))
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


if __name__ == "__main__":
    from tests.fakeserver_cli import main

    main()
