"""The grading page in a real headless Chromium (Debian's /usr/bin/chromium driven by Playwright).

Skipped when Chromium or Playwright is missing (`.ci/run` installs Chromium).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from calibration.spotcheck.annotate.gradelog import GradeLog, grade_log_path
from calibration.spotcheck.annotate.server import AnnotateServer
from calibration.spotcheck.blind import prompt_scale, read_blind_csv
from tests.helpers.annotate_sample import SCRIPT_DOC, write_sample
from tests.helpers.chromium import chromium, needs_chromium

pytestmark = [pytest.mark.browser, needs_chromium]
pytest.importorskip("playwright.sync_api")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as b:
        yield b


class Page:
    """A grading server for one annotator plus a browser tab on it."""

    def __init__(self, browser: Any, sample: Path, annotator: str) -> None:
        items = read_blind_csv(sample)
        self.log = GradeLog(grade_log_path(sample, annotator), annotator)
        self.server = AnnotateServer(
            list(items),
            self.log,
            prompt_scale("passage"),
        )
        self.url = self.server.start()
        self.context = browser.new_context()
        self.page = self.context.new_page()
        self.errors: list[str] = []
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.open()

    def open(self) -> None:
        self.page.goto(self.url)
        self.page.wait_for_selector("body[data-ready=true]")

    def doc_id(self) -> str:
        return str(self.page.text_content("#doc-id"))

    def press(self, key: str, *, saves: bool = False) -> None:
        if saves:
            with self.page.expect_response("**/api/grade") as reply:
                self.page.keyboard.press(key)
            assert reply.value.ok
            self.page.wait_for_selector("body:not([data-busy])", state="attached")
        else:
            self.page.keyboard.press(key)

    def close(self) -> None:
        self.context.close()
        self.server.stop()


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    return write_sample(tmp_path, n=4)


@pytest.mark.slow
def test_grade_by_keyboard_reload_and_resume(browser: Any, sample: Path) -> None:
    ui = Page(browser, sample, "ann")
    try:
        assert ui.page.text_content("#progress") == "0 of 4 graded"
        assert "Perfectly relevant" in str(ui.page.text_content("#grade-3"))
        first = ui.doc_id()
        ui.press("2", saves=True)
        second = ui.doc_id()
        assert second != first
        ui.press("j")  # skip the second item
        third = ui.doc_id()
        ui.press("0", saves=True)
        ui.press("ArrowLeft")
        ui.press("ArrowLeft")
        assert ui.doc_id() == second
        ui.press("k")
        assert ui.doc_id() == first
        assert ui.page.get_attribute("#grade-2", "class") == "chosen"
        assert ui.page.text_content("#progress") == "2 of 4 graded"

        ui.open()  # reload: grades kept, resumes at the first ungraded item
        assert ui.page.text_content("#progress") == "2 of 4 graded"
        assert ui.doc_id() == second
        ui.press("3", saves=True)
        assert ui.log.read() == {
            ("q1", first): 2,
            ("q2", second): 3,
            ("q1", third): 0,
        }
        assert ui.errors == []
    finally:
        ui.close()


@pytest.mark.slow
def test_a_second_annotator_grades_the_same_sample_separately(browser: Any, sample: Path) -> None:
    ann = Page(browser, sample, "ann")
    try:
        ann.press("1", saves=True)
    finally:
        ann.close()
    bob = Page(browser, sample, "bob")
    try:
        assert bob.page.text_content("#progress") == "0 of 4 graded"
        assert "bob" in str(bob.page.text_content("#annotator"))
        bob.press("3", saves=True)
        assert list(bob.log.read().values()) == [3]
    finally:
        bob.close()
    assert list(ann.log.read().values()) == [1]
    assert ann.log.path != bob.log.path


@pytest.mark.slow
def test_a_document_holding_script_is_shown_as_text_and_never_runs(
    browser: Any, sample: Path
) -> None:
    ui = Page(browser, sample, "ann")
    try:
        ui.press("j")
        assert ui.doc_id() == "d1"
        assert ui.page.text_content("#document") == SCRIPT_DOC
        assert ui.page.eval_on_selector("#document", "el => el.children.length") == 0
        assert ui.page.evaluate("window.pwned === undefined")
        assert ui.page.query_selector("#document script") is None
        assert ui.errors == []
    finally:
        ui.close()
