"""The grading progress bar on stderr: done / cached / failed, rate, ETA and spend.

The library only reports `ProgressEvent`s (`grader.grading.events`); this bar is the callback the
CLI gives it. Shown only when its stream is a terminal and not `--quiet`; otherwise every call is a
no-op. The bar starts with the first event (after the store lookup, so a dry run draws nothing).
Rich redraws on its own thread at a few frames per second, so an update per judgment stays cheap.
"""

from __future__ import annotations

import sys
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
)

from grader.grading.events import ProgressEvent


class GradingProgress:
    """Progress of one grading run, drawn on `file` (default: stderr): the bar counts the pairs
    that need requests; pairs found in the store are shown as `cached` (they would otherwise
    inflate the rate and ETA). `enabled` None: draw only when `file` is a terminal."""

    def __init__(self, *, enabled: bool | None = None, file: TextIO | None = None) -> None:
        stream = file if file is not None else sys.stderr
        if enabled is None:
            enabled = stream.isatty()
        self.enabled = enabled
        self.last: ProgressEvent | None = None
        self._entered = False
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        if enabled:
            # An explicit file: the caller decided to draw, so draw as on a terminal.
            console = (
                Console(stderr=True) if file is None else Console(file=file, force_terminal=True)
            )
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
                console=console,
                refresh_per_second=4,
                transient=False,
            )

    def __enter__(self) -> GradingProgress:
        self._entered = True
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._entered = False
        if self._progress is not None and self._task is not None:
            self._progress.stop()

    def __call__(self, event: ProgressEvent) -> None:
        """Show `event` (the `ProgressCallback` the grading run calls)."""
        self.last = event
        progress = self._progress
        if progress is None or not self._entered:
            return
        spend = f"{event.spend:.4f}"
        if self._task is None:
            self._task = progress.add_task(
                "grading",
                total=event.total,
                completed=event.done,
                cached=event.cached,
                failed=event.failed,
                rate="-",
                spend=spend,
            )
            progress.start()
            return
        speed = progress.tasks[0].speed
        progress.update(
            self._task,
            total=event.total,
            completed=event.done,
            cached=event.cached,
            failed=event.failed,
            rate="-" if not speed else f"{speed:.1f}",
            spend=spend,
        )

    def refresh(self) -> None:
        """Draw the bar now (rich otherwise redraws on its own thread)."""
        if self._progress is not None and self._task is not None:
            self._progress.refresh()
