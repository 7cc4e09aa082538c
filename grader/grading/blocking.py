"""Running a grading coroutine to the end from synchronous code, wherever it is called.

Where a loop already runs (Jupyter) the coroutine runs in a thread with its own loop. Ctrl-C presses
the run's `StopButton` (a second abandons the calls in flight); the caller raises KeyboardInterrupt
once the run has ended, the store resumable.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Awaitable, Callable, Iterator
from typing import TypeVar

from grader.grading.events import StopButton

T = TypeVar("T")

WAIT_S = 0.1  # how often the waiting thread wakes (a KeyboardInterrupt lands between waits)


@contextlib.contextmanager
def _ctrl_c_raises() -> Iterator[None]:
    """Python's own SIGINT handler (KeyboardInterrupt) while the main thread waits, as
    ipykernel sets it while a cell runs: a loop's handler there (`asyncio.run`'s cancels its
    main task, which this wait never yields to) would leave Ctrl-C unheard until the end."""
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
    """Run `make(stop)` in a worker thread with its own event loop; return its result and
    whether Ctrl-C was pressed meanwhile. Its exception is raised here."""
    import asyncio

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

    # An Event, not Thread.join: a KeyboardInterrupt inside join can leave the thread marked
    # as ended while it still runs (CPython's join is not safe to interrupt).
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
