"""The `ProgressEvent` callbacks the CLI and the Python API give a grading run: a rich bar on a
terminal, a log line every LOG_EVERY_S seconds elsewhere, a tqdm bar or one line in Jupyter. The
rate is `RecentRate`'s: rich's 30 s window is blank for a slow model, too high after a burst."""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from collections import deque
from collections.abc import Callable
from typing import Any, TextIO

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
EVERY_S = 0.25  # how often `LineProgress` redraws
WINDOW_S = 300.0
"""The least time the rate is taken over (the whole run, while it is younger)."""
WINDOW_DONE = 20
"""The least completions the rate is taken over, when that reaches further back."""


class RecentRate:
    """Pairs per second over the last WINDOW_S seconds or WINDOW_DONE completions, up to now."""

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
    """Progress of one grading run on `file`: `enabled` None draws only on a terminal."""

    def __init__(self, *, enabled: bool | None = None, file: TextIO | None = None) -> None:
        stream = file if file is not None else sys.stderr
        self._log: TextIO | None = None
        if enabled is None:
            enabled = stream.isatty()
            self._log = None if enabled else stream
        self.enabled = enabled
        try:  # `RELGRADE_PROGRESS_EVERY`, else LOG_EVERY_S
            self._log_every = max(0.0, float(os.environ.get(LOG_EVERY_ENV) or LOG_EVERY_S))
        except ValueError:
            self._log_every = LOG_EVERY_S
        self._logged: float | None = None  # when the first event came, then the last line
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

    def __exit__(self, *exc: object) -> None:
        self._entered = False
        if self._progress is not None and self._task is not None:
            self._progress.stop()

    def __call__(self, event: ProgressEvent) -> None:
        """Show `event`; the bar starts with the first (after the lookup: a dry run draws none)."""
        self.last = event
        progress = self._progress
        if self._log is None and (progress is None or not self._entered):
            return
        if self._logged is None:  # the first event: the rate starts here
            self._first_done, self._rate, self._logged = event.done, RecentRate(), time.monotonic()
            if progress is not None:
                self._task = progress.add_task(
                    "grading", total=event.total, completed=event.done, **self._fields(event)
                )
                progress.start()
            return
        self._rate.update(event.done)
        if progress is not None:
            assert self._task is not None
            progress.update(
                self._task, total=event.total, completed=event.done, **self._fields(event)
            )
            return
        now = time.monotonic()
        if now - self._logged < self._log_every:
            return
        self._logged = now
        assert self._log is not None
        self._log.write(
            "grading {done}/{total} · cached {cached} · failed {failed} · {rate}/s · ETA {eta} · "
            "{spend}\n".format(done=event.done, total=event.total, **self._fields(event))
        )
        self._log.flush()

    def _fields(self, event: ProgressEvent) -> dict[str, Any]:
        speed = self._rate.rate(self._first_done)
        return {
            "cached": event.cached,
            "failed": event.failed,
            "rate": f"{speed:.2f}" if speed else "-",
            "eta": self._rate.eta(event.total - event.done, self._first_done),
            "spend": spend_short(event.spend, event.cost_known),
        }


class LineProgress:
    """`grading 12/40 · cached 3 · failed 0 · $0.0021`, rewritten in place on `file`."""

    def __init__(self, file: TextIO | None = None) -> None:
        self.file = file if file is not None else sys.stderr
        self.last: ProgressEvent | None = None
        self._shown = 0.0
        self._bar: Any = None  # tqdm's, made at the first event

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.last is not None:
            self._show(self.last)
            if self._bar is not None:
                self._bar.close()
            else:
                self.file.write("\n")
                self.file.flush()

    def __call__(self, event: ProgressEvent) -> None:
        first = self.last is None
        if first:
            self._bar = _tqdm(event.total, self.file)
        self.last = event
        now = time.monotonic()
        if first or now - self._shown >= EVERY_S or event.done == event.total:
            self._shown = now
            self._show(event)

    def _show(self, event: ProgressEvent) -> None:
        spend = spend_short(event.spend, event.cost_known)
        text = f"cached {event.cached} · failed {event.failed} · {spend}"
        if self._bar is not None:
            self._bar.total = event.total
            self._bar.n = event.done
            self._bar.set_postfix_str(text, refresh=True)
            return
        self.file.write(f"\rgrading {event.done}/{event.total} · {text}")
        self.file.flush()


def _tqdm(total: int, file: TextIO) -> Any:
    """A tqdm bar (a notebook widget only with ipywidgets), or None without tqdm."""
    try:
        if importlib.util.find_spec("ipywidgets") is not None:
            from tqdm.auto import tqdm
        else:
            from tqdm.std import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc="grading", file=file)


def progress_for_api(enabled: bool) -> Any:
    """The progress callback (a context manager) `relgrade.grade` draws with."""
    if not enabled:
        return GradingProgress(enabled=False)
    if sys.stderr.isatty() or "ipykernel" not in sys.modules:
        return GradingProgress()  # a bar on a terminal; else (a script's log) a line now and then
    return LineProgress()
