"""The CLI's progress bar: counts, spend, and silence when not wanted.

Every bar here draws on a stream the test gives, so the tests pass the same with or without
`pytest -s` (when stderr may be a terminal).
"""

from __future__ import annotations

import io

from grader.cli.progress import GradingProgress
from grader.grading.events import ProgressEvent


class _Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_progress_shows_counts_and_spend() -> None:
    buffer = io.StringIO()
    with GradingProgress(enabled=True, file=buffer) as bar:
        bar(ProgressEvent(total=3, cached=5))
        bar(ProgressEvent(total=3, cached=5, done=1, spend=0.25))
        bar(ProgressEvent(total=3, cached=5, done=2, failed=1, spend=0.75))
        bar.refresh()
    text = buffer.getvalue()
    assert "2/3" in text
    assert "cached 5" in text and "failed 1" in text and "$0.7500" in text


def test_disabled_progress_draws_nothing() -> None:
    buffer = io.StringIO()
    with GradingProgress(enabled=False, file=buffer) as bar:
        bar(ProgressEvent(total=3, cached=0, done=1, failed=1, spend=1.0))
        bar.refresh()
    assert bar.last == ProgressEvent(total=3, cached=0, done=1, failed=1, spend=1.0)
    assert buffer.getvalue() == ""


def test_default_follows_whether_the_stream_is_a_terminal() -> None:
    assert GradingProgress(file=io.StringIO()).enabled is False
    terminal = _Terminal()
    with GradingProgress(file=terminal) as bar:
        assert bar.enabled is True
        bar(ProgressEvent(total=4, cached=1, done=4))
    assert "4/4" in terminal.getvalue()


def test_no_event_no_bar() -> None:
    # A dry run reports no event: nothing is drawn, not even an empty bar.
    buffer = io.StringIO()
    with GradingProgress(enabled=True, file=buffer):
        pass
    assert buffer.getvalue() == ""
