"""The progress bar: counts, spend, and silence when not wanted."""

from __future__ import annotations

import io

from grader.grading.progress import GradingProgress


def test_progress_shows_counts_and_spend() -> None:
    bar = GradingProgress(3, cached=5, enabled=True)
    assert bar._progress is not None
    buffer = io.StringIO()
    bar._progress.console.file = buffer
    with bar:
        bar.advance(cost=0.25)
        bar.advance(failed=True)
        bar.add_spend(0.5)
        bar._progress.refresh()
    text = buffer.getvalue()
    assert "2/3" in text
    assert "cached 5" in text and "failed 1" in text and "$0.7500" in text


def test_disabled_progress_draws_nothing() -> None:
    bar = GradingProgress(3, enabled=False)
    with bar:
        bar.advance(failed=True, cost=1.0)
    assert bar.failed == 1 and bar.spend == 1.0
    assert bar._progress is None


def test_default_is_off_when_stderr_is_not_a_terminal() -> None:
    # Under pytest stderr is captured, not a terminal.
    assert GradingProgress(1).enabled is False
