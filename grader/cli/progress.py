"""The grading progress bar on stderr: done / cached / failed, rate, ETA and spend.

Shown only when stderr is a terminal and not `--quiet`; otherwise every call is a no-op, so the
pipeline calls it unconditionally. Rich redraws on its own thread at a few frames per second,
so updating per judgment stays cheap.
"""

from __future__ import annotations

import sys
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)


class GradingProgress:
    """Progress of one grading run: the bar counts the pairs that need requests; pairs found in
    the store are shown as `cached` (they would otherwise inflate the rate and ETA)."""

    def __init__(self, total: int, *, cached: int = 0, enabled: bool | None = None) -> None:
        if enabled is None:
            enabled = sys.stderr.isatty()
        self.enabled = enabled
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self.total = total
        self.cached = cached
        self.failed = 0
        self.spend = 0.0
        if enabled:
            self._progress = Progress(
                TextColumn("grading"),
                BarColumn(bar_width=24),
                MofNCompleteColumn(),
                TextColumn(
                    "cached {task.fields[cached]} · failed {task.fields[failed]} · "
                    "{task.fields[rate]}/s · ${task.fields[spend]}"
                ),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=Console(stderr=True),
                refresh_per_second=4,
                transient=False,
            )
            self._task = self._progress.add_task(
                "grading", total=total, cached=cached, failed=0, rate="-", spend="0.0000"
            )

    def __enter__(self) -> GradingProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.stop()

    def advance(self, *, failed: bool = False, cost: float = 0.0) -> None:
        """One pair that needed requests finished (ok or `failed`), costing `cost`."""
        self.failed += failed
        self.spend += cost
        if self._progress is None or self._task is None:
            return
        task = self._progress.tasks[0]
        speed = task.speed
        self._progress.update(
            self._task,
            advance=1,
            cached=self.cached,
            failed=self.failed,
            rate="-" if not speed else f"{speed:.1f}",
            spend=f"{self.spend:.4f}",
        )

    def add_spend(self, cost: float) -> None:
        """Money spent on a call that did not finish a pair (e.g. one ensemble member)."""
        self.spend += cost
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, spend=f"{self.spend:.4f}")
