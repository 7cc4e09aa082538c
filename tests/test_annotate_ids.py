"""The annotation page shows ids as they are written, and `annotate --help` names the flag for
grading a sample twice (human vs human)."""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from calibration.spotcheck.annotate.gradelog import GradeLog, grade_log_path
from calibration.spotcheck.annotate.server import AnnotateServer
from calibration.spotcheck.blind import BlindItem, neutral_scale, read_blind_csv, write_blind_csv
from grader.cli.main import main
from tests.helpers.chromium import chromium, needs_chromium

MIXED_ID = "MSMARCO_v2.1_doc_29_677149#3_1234567"


def _sample(folder: Path) -> Path:
    sample = folder / "sample.csv"
    write_blind_csv(sample, [BlindItem("Q-lower-1", MIXED_ID, "a query", "a text")])
    return sample


def _server(sample: Path) -> AnnotateServer:
    items = read_blind_csv(sample)
    return AnnotateServer(
        list(items), GradeLog(grade_log_path(sample, "ann"), "ann"), neutral_scale()
    )


def test_annotate_help_points_to_second_human(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["annotate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--second-human" in text
    assert "--llm b.qrels" not in text  # no longer the person-B-as-the-LLM detour


def test_the_page_style_changes_no_letter_case(tmp_path: Path) -> None:
    server = _server(_sample(tmp_path))
    url = server.start()
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/static/app.css") as reply:
            css = reply.read().decode()
    finally:
        server.stop()
    assert "#document" in css  # the real style sheet
    transforms = re.findall(r"text-transform\s*:\s*([a-z-]+)", css)
    assert all(t == "none" for t in transforms), transforms


@pytest.mark.browser
@needs_chromium
@pytest.mark.slow
def test_the_page_shows_a_mixed_case_id_as_written(tmp_path: Path) -> None:
    pytest.importorskip("playwright.sync_api")
    server = _server(_sample(tmp_path))
    url = server.start()
    try:
        with chromium() as browser:
            page: Any = browser.new_page()
            page.goto(url)
            page.wait_for_selector("body[data-ready=true]")
            assert page.inner_text("#doc-id").strip() == MIXED_ID  # rendered text, CSS applied
            heading = page.inner_text("section.doc h2")
            assert MIXED_ID in heading
    finally:
        server.stop()
