"""The regrade diff's HTML report when nothing changed: it says so, shows no empty table, and
keeps a page margin."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from grader.cli.main import main
from tests.fakeserver import FakeServer
from tests.grade_data import write_grade_files


@pytest.mark.slow
@pytest.mark.usefixtures("llm_env")
def test_diff_html_with_nothing_changed_says_so_and_has_a_page_margin(
    fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_grade_files(tmp_path)
    base = ["--base-url", fake_server.base_url, "--store", str(tmp_path / "s.db"), "--quiet"]
    assert main(files.args(*base, "--model", "judge-a")) == 0
    report = tmp_path / "diff.html"
    argv = ["regrade", "--store", str(tmp_path / "s.db"), "--base-url", fake_server.base_url]
    # The fake server's grade depends on the prompt's text only: another model changes nothing.
    argv += ["--model", "judge-b", "--report", str(report), "--quiet"]
    assert main(argv) == 0
    capsys.readouterr()
    page = report.read_text(encoding="utf-8")
    n = files.n_pairs
    assert '<span id="changed">0</span> changed' in page
    assert f"No pair of the {n} graded ok in both versions changed its grade." in page
    assert "<tbody></tbody>" not in page  # no empty table under "Changed pairs"
    body_rule = re.search(r"body \{([^}]*)\}", page)
    assert body_rule and "padding: 0 1.5em" in body_rule[1]  # a margin in a narrow window
