"""How a grading run reports its progress: a typed event handed to a callback the caller gives.

The library draws nothing itself; the CLI passes a bar (`grader.display.progress`), a test or an
embedding program may pass any callable, or nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ProgressEvent:
    """Where a grading run stands: `total` pairs need requests (stored ones are `cached`), `done` of
    them finished, `failed` of those; `spend` USD so far, `cost_known` False when a judge has no
    price."""

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
    """Ctrl-C pressed from another thread (a notebook's stop button): `press()` does what SIGINT
    does with `handle_sigint`; a second press abandons the calls in flight."""

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
