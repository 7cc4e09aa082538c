"""The CLI's progress bar: counts, spend, and silence when not wanted.

Every bar here draws on a stream the test gives, so the tests pass the same with or without
`pytest -s` (when stderr may be a terminal).
"""

from __future__ import annotations

import io

from grader.display.progress import GradingProgress
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
    text = buffer.getvalue()
    assert "2/3" in text
    assert "cached 5" in text and "failed 1" in text and "$0.7500" in text


def test_disabled_progress_draws_nothing() -> None:
    buffer = io.StringIO()
    with GradingProgress(enabled=False, file=buffer) as bar:
        bar(ProgressEvent(total=3, cached=0, done=1, failed=1, spend=1.0))
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


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_rate_of_a_slow_server_is_taken_over_the_run_not_a_burst() -> None:
    from grader.display.progress import RecentRate

    clock = _Clock()
    rate = RecentRate(clock)
    assert rate.rate() is None and rate.eta(10) == "-:--:--"
    # 8 replies queued in the server arrive together after 240 s: 1 pair per 30 s
    clock.now = 240.0
    for done in range(1, 9):
        rate.update(done)
    assert rate.rate() == 8 / 240
    assert rate.eta(2) == "0:01:00"
    clock.now = 480.0  # a stall lowers the rate
    assert rate.rate() == 8 / 480


def test_rate_follows_the_recent_window_once_the_run_is_long() -> None:
    from grader.display.progress import WINDOW_DONE, WINDOW_S, RecentRate

    clock = _Clock()
    rate = RecentRate(clock)
    for done in range(1, 101):  # a slow start: one pair every 60 s
        clock.now = done * 60.0
        rate.update(done)
    for done in range(101, 201):  # then one every 6 s
        clock.now += 6.0
        rate.update(done)
    recent = rate.rate()
    assert recent is not None
    assert recent > 100 / (clock.now)  # faster than over the whole run
    assert recent * max(WINDOW_S, 6.0 * WINDOW_DONE) >= WINDOW_DONE
