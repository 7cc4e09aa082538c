"""The grading page says "you may stop" in a real headless Chromium, with calibrate's numbers.

Debian's /usr/bin/chromium driven by Playwright; skipped when either is missing. A person grades
an active sample in the page's order (the LLM's grade, and now and then another) until the page
says they may stop; the estimate and the confidence sequence shown then must equal what
`relgrade calibrate` reports on the exported grades.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.helpers.active_sample import active_sample, calibrate_share, live_server
from tests.helpers.chromium import chromium, needs_chromium

pytestmark = [pytest.mark.browser, needs_chromium, pytest.mark.slow]
pytest.importorskip("playwright.sync_api")


def _grade_until_stop(page: Any, llm: dict[tuple[str, str], int], limit: int) -> int:
    """Press the grade keys until the page says "you may stop"; returns the grades given."""
    for t in range(1, limit + 1):
        query_id = page.evaluate("state.items[state.index].query_id")
        doc_id = str(page.text_content("#doc-id"))
        grade = llm[(query_id, doc_id)]
        if t % 7 == 0:
            grade = 1 if grade >= 2 else 2
        with page.expect_response("**/api/grade") as reply:
            page.keyboard.press(str(grade))
        assert reply.value.ok
        page.wait_for_selector("body:not([data-busy])", state="attached")
        if page.is_visible("#live-stop"):
            return t
    raise AssertionError(f"no 'you may stop' after {limit} grades")


def test_the_page_says_you_may_stop_with_calibrates_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sample, judgments, llm = active_sample(tmp_path)
    server = live_server(sample, judgments, target=0.15)
    url = server.start()
    try:
        with chromium() as browser:
            page = browser.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(url)
            page.wait_for_selector("body[data-ready=true]")
            assert page.is_visible("#live") and not page.is_visible("#live-stop")
            graded = _grade_until_stop(page, llm, limit=120)
            shown = {
                "estimate": float(page.get_attribute("#live-estimate", "data-value") or "nan"),
                "low": float(page.get_attribute("#live-cs", "data-low") or "nan"),
                "high": float(page.get_attribute("#live-cs", "data-high") or "nan"),
                "half": float(page.get_attribute("#live-half", "data-value") or "nan"),
            }
            text = " ".join(str(page.text_content("#live")).split())
            assert errors == []
    finally:
        server.stop()
    assert "You may stop" in text and f"{shown['estimate']:.3f}" in text
    assert shown["half"] <= 0.15
    share = calibrate_share(tmp_path, sample, judgments, capsys)
    assert share["cs_n"] == graded
    assert share["cs_estimate"] == pytest.approx(shown["estimate"], abs=1e-12)
    assert share["cs"] == pytest.approx([shown["low"], shown["high"]], abs=1e-12)
