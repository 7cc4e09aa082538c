"""The Python API's progress: in Jupyter a tqdm bar (a widget with ipywidgets) or else one line
rewritten in place; elsewhere the command's bar (`grader.display.progress`). Updates are
throttled: a run calls back once per judge call, from its event loop's thread."""

from __future__ import annotations

import importlib.util
import sys
import time
from types import TracebackType
from typing import Any, TextIO

from grader.cost import spend_short
from grader.grading.events import ProgressEvent

EVERY_S = 0.25


class LineProgress:
    """`grading 12/40 · cached 3 · failed 0 · $0.0021`, rewritten in place on `file`."""

    def __init__(self, file: TextIO | None = None) -> None:
        self.file = file if file is not None else sys.stderr
        self.last: ProgressEvent | None = None
        self._shown = 0.0
        self._bar: Any = None
        self._tried = False

    def __enter__(self) -> LineProgress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.last is not None:
            self._show(self.last)
            if self._bar is not None:
                self._bar.close()
            else:
                self.file.write("\n")
                self.file.flush()

    def __call__(self, event: ProgressEvent) -> None:
        first = self.last is None
        self.last = event
        now = time.monotonic()
        if first or now - self._shown >= EVERY_S or event.done == event.total:
            self._shown = now
            self._show(event)

    def _show(self, event: ProgressEvent) -> None:
        if not self._tried:
            self._tried = True
            self._bar = _tqdm(event.total, self.file)
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
    """A tqdm bar when tqdm is installed (its notebook widget only when ipywidgets is too: else
    tqdm.auto would warn, naming a path, and fall back), else None (the plain line)."""
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
    from grader.display.progress import GradingProgress

    if not enabled:
        return GradingProgress(enabled=False)
    if sys.stderr.isatty() or "ipykernel" not in sys.modules:
        return GradingProgress()  # a bar on a terminal; else (a script's log) a line now and then
    return LineProgress()
