"""How a grading run reports its progress: a typed event handed to a callback the caller gives.

The library draws nothing itself; the CLI passes a bar (`grader.cli.progress`), a test or an
embedding program may pass any callable, or nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ProgressEvent:
    """Where a grading run stands: `total` pairs need requests (pairs found in the store are
    counted in `cached` instead); `done` of them finished, `failed` of those as failures;
    `spend` is the USD of the priced judgments so far."""

    total: int
    cached: int
    done: int = 0
    failed: int = 0
    spend: float = 0.0


ProgressCallback = Callable[[ProgressEvent], None]
"""Called once when the run starts sending (after the store lookup), then after every judge
call; from the event loop's thread, so it must return quickly."""
