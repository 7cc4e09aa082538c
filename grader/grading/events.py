"""How a caller follows and drives a grading run: progress events for its callback (the library
draws nothing), a stop button, and running a grading coroutine from synchronous code."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")

WAIT_S = 0.1  # how often `run_blocking`'s waiting thread wakes (Ctrl-C lands between waits)


@dataclass(frozen=True)
class ProgressEvent:
    """Where a run stands: `total` pairs need requests, `done` of them (`failed` among them)."""

    total: int
    cached: int
    done: int = 0
    failed: int = 0
    spend: float = 0.0
    cost_known: bool = True


ProgressCallback = Callable[[ProgressEvent], None]
"""Called once when the run starts sending (after the store lookup), then after every judge
call; from the event loop's thread, so it must return quickly."""


class StopButton:
    """Ctrl-C pressed from another thread (a notebook's stop button), as SIGINT would."""

    def __init__(self) -> None:
        self._press: Callable[[], None] | None = None
        self._loop: Any = None
        self.presses = 0

    def attach(self, loop: Any, press: Callable[[], None]) -> None:
        """Called by the run: `press` runs on `loop` (presses made before are replayed)."""
        self._loop, self._press = loop, press
        for _ in range(self.presses):
            loop.call_soon_threadsafe(press)

    def detach(self) -> None:
        self._loop = self._press = None

    def press(self) -> None:
        """Stop the run (thread-safe)."""
        self.presses += 1
        loop, press = self._loop, self._press
        if loop is not None and press is not None:
            loop.call_soon_threadsafe(press)


@contextlib.contextmanager
def _ctrl_c_raises() -> Iterator[None]:
    """Python's own SIGINT handler while the main thread waits, as ipykernel sets it in a cell: a
    loop's handler (cancelling a task this wait never yields to) would leave Ctrl-C unheard."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def run_blocking(make: Callable[[StopButton], Awaitable[T]]) -> tuple[T, bool]:
    """Run `make(stop)` in a thread with its own loop: its result, and whether Ctrl-C was hit."""
    stop = StopButton()
    box: dict[str, object] = {}

    async def main() -> None:
        box["value"] = await make(stop)

    done = threading.Event()

    def target() -> None:
        try:
            asyncio.run(main())
        except BaseException as exc:  # raised again in the caller's thread
            box["error"] = exc
        finally:
            done.set()

    # An Event, not Thread.join: CPython's join is not safe to interrupt with KeyboardInterrupt.
    thread = threading.Thread(target=target, name="relgrade-grading", daemon=True)
    with _ctrl_c_raises():
        thread.start()
        while not done.is_set():
            try:
                done.wait(WAIT_S)
            except KeyboardInterrupt:
                stop.press()
    thread.join()
    error = box.get("error")
    if isinstance(error, BaseException):
        raise error
    return box["value"], stop.presses > 0  # type: ignore[return-value]
