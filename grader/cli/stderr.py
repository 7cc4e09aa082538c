"""What the commands say on stderr beside their results: notes, the store's waits for its lock
(`open_store`), what killed runs left beside the outputs; and Ctrl-C, raised at once (also inside
`asyncio.run`), with the line that tells what an interrupted run stored and how to resume it."""

from __future__ import annotations

import contextlib
import shlex
import signal
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import FrameType

from grader.errors import InputError
from grader.grading.report import GradingReport
from grader.job import judgments_and_qrels
from grader.job.grade import interrupted_text
from grader.job.summary import busy_text, summary_line
from grader.store.busy import StoreBusyEvent
from grader.store.store import Store


def say(text: str) -> None:
    """A line on stderr, flushed."""
    print(text, file=sys.stderr, flush=True)


def print_store_busy(event: StoreBusyEvent) -> None:
    """The store's `on_busy`: the wait for its lock, on stderr (also from the writer's thread)."""
    say(busy_text(event))


def open_store(path: str, by: str = "regrade", *, create: bool = False) -> Store:
    """The store at `path`; without `create`, InputError when there is none (`by`: the
    command that should have made it)."""
    if not create and not Path(path).is_file():
        raise InputError("no store here", path=path, hint=f"give the --store {by} used")
    return Store(path, on_busy=print_store_busy)


def clean_outputs(paths: Sequence[str | Path | None]) -> None:
    """`judgments_and_qrels.clean_outputs`, said on stderr."""
    for line in judgments_and_qrels.clean_outputs(paths):
        print(line, file=sys.stderr)


def resume_hint() -> str:
    """How to resume this run: the same command line."""
    return "rerun the same command: relgrade " + shlex.join(sys.argv[1:])


def report_interrupted(report: GradingReport, done: int, total: int, *, quiet: bool) -> int:
    """Print what an interrupted live run stored (its summary line too, unless `quiet`) and how
    to resume it; the exit code (130)."""
    if not quiet:
        print(summary_line(report), file=sys.stderr)
    print(interrupted_text(done, total, resume_hint()), file=sys.stderr)
    return 130


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


@contextlib.contextmanager
def interrupt_at_once() -> Iterator[None]:
    """In this block a Ctrl-C raises KeyboardInterrupt where the main thread is, also in code
    run by `asyncio.run`, which would otherwise only cancel its task and let a blocking step (a
    wait for a busy store) go on. A grading run installs its own handler while it runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
