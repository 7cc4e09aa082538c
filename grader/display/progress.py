"""The grading progress bar on stderr: done / cached / failed, rate, ETA and spend.

The library only reports `ProgressEvent`s (`grader.grading.events`); this bar is the callback the
CLI gives it. Drawn when its stream is a terminal and not `--quiet`. Where stderr is no terminal
(nohup, Slurm, CI logs) it writes a plain line instead, every `LOG_EVERY_S` seconds (the
environment variable `RELGRADE_PROGRESS_EVERY` sets it): done, cached, failed, rate, ETA, spend.
With `--quiet` every call is a no-op. The bar starts with the first event (after the store
lookup, so a dry run draws nothing).
Rich redraws on its own thread at a few frames per second, so an update per judgment stays cheap.

The rate and ETA are `RecentRate`'s, not rich's 30-second window: a local model answering a pair
every 30 s (0.03 pairs/s) leaves at most one completion in 30 s, so rich's rate is blank, or a
burst of replies that waited in the server's queue makes it several times too high.
"""

from __future__ import annotations

import os
import sys
import time
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import TextIO

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
)

from grader.cost import spend_short
from grader.grading.events import ProgressEvent

LOG_EVERY_S = 30.0
"""Seconds between two progress lines where stderr is no terminal."""
LOG_EVERY_ENV = "RELGRADE_PROGRESS_EVERY"
WINDOW_S = 300.0
"""The least time the rate is taken over (the whole run, while it is younger)."""
WINDOW_DONE = 20
"""The least completions the rate is taken over, when that reaches further back."""


class RecentRate:
    """Pairs per second over the last WINDOW_S seconds or the last WINDOW_DONE completions,
    whichever reaches further back, up to now (so a stall lowers it), from the run's start
    while the run is younger; and the ETA of the rest at that rate."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._start = clock()
        self._marks: deque[tuple[float, int]] = deque()  # (time, done) at each completion

    def update(self, done: int) -> None:
        """`done` pairs are finished now."""
        if self._marks and self._marks[-1][1] == done:
            return
        now = self._clock()
        self._marks.append((now, done))
        while len(self._marks) > WINDOW_DONE + 1 and now - self._marks[1][0] > WINDOW_S:
            self._marks.popleft()

    def rate(self, first_done: int = 0) -> float | None:
        """Pairs per second (None before the first completion)."""
        if not self._marks:
            return None
        now = self._clock()
        since, base = self._start, first_done
        if len(self._marks) > WINDOW_DONE and now - self._marks[0][0] >= WINDOW_S:
            since, base = self._marks[0]
        elapsed = now - since
        finished = self._marks[-1][1] - base
        return finished / elapsed if elapsed > 0 and finished > 0 else None

    def eta(self, remaining: int, first_done: int = 0) -> str:
        """`H:MM:SS` left at the rate, or `-:--:--` while there is none."""
        rate = self.rate(first_done)
        if rate is None:
            return "-:--:--"
        seconds = int(remaining / rate)
        return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


class GradingProgress:
    """Progress of one grading run, drawn on `file` (default: stderr): the bar counts the pairs
    that need requests; pairs found in the store are shown as `cached` (they would otherwise
    inflate the rate and ETA). `enabled` None: draw only when `file` is a terminal."""

    def __init__(self, *, enabled: bool | None = None, file: TextIO | None = None) -> None:
        stream = file if file is not None else sys.stderr
        self._log: TextIO | None = None
        if enabled is None:
            enabled = stream.isatty()
            self._log = None if enabled else stream
        self.enabled = enabled
        self._log_every = log_every()
        self._logged = float("-inf")
        self.last: ProgressEvent | None = None
        self._entered = False
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._rate = RecentRate()
        self._first_done = 0
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
                    "{task.fields[rate]}/s · {task.fields[spend]}"
                ),
                TextColumn("ETA {task.fields[eta]}"),
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
        if self._log is not None:
            self._log_line(event)
            return
        progress = self._progress
        if progress is None or not self._entered:
            return
        spend = spend_short(event.spend, event.cost_known)
        if self._task is None:
            self._first_done = event.done
            self._rate = RecentRate()
            self._task = progress.add_task(
                "grading",
                total=event.total,
                completed=event.done,
                cached=event.cached,
                failed=event.failed,
                rate="-",
                eta="-:--:--",
                spend=spend,
            )
            progress.start()
            return
        self._rate.update(event.done)
        speed = self._rate.rate(self._first_done)
        progress.update(
            self._task,
            total=event.total,
            completed=event.done,
            cached=event.cached,
            failed=event.failed,
            rate="-" if not speed else f"{speed:.2f}",
            eta=self._rate.eta(event.total - event.done, self._first_done),
            spend=spend,
        )

    def _log_line(self, event: ProgressEvent) -> None:
        """A plain line every `log_every()` seconds (module docstring)."""
        if self._logged == float("-inf"):  # the first event: the rate starts here
            self._first_done, self._rate = event.done, RecentRate()
            self._logged = time.monotonic()
            return
        self._rate.update(event.done)
        now = time.monotonic()
        if now - self._logged < self._log_every:
            return
        self._logged = now
        speed = self._rate.rate(self._first_done)
        assert self._log is not None
        self._log.write(
            f"grading {event.done}/{event.total} · cached {event.cached} · failed "
            f"{event.failed} · {'-' if not speed else f'{speed:.2f}'}/s · ETA "
            f"{self._rate.eta(event.total - event.done, self._first_done)} · "
            f"{spend_short(event.spend, event.cost_known)}\n"
        )
        self._log.flush()

    def refresh(self) -> None:
        """Draw the bar now (rich otherwise redraws on its own thread)."""
        if self._progress is not None and self._task is not None:
            self._progress.refresh()


def log_every() -> float:
    """Seconds between progress lines where stderr is no terminal: `RELGRADE_PROGRESS_EVERY`,
    else LOG_EVERY_S."""
    try:
        return max(0.0, float(os.environ.get(LOG_EVERY_ENV) or LOG_EVERY_S))
    except ValueError:
        return LOG_EVERY_S
