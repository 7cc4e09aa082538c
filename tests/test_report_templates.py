"""HTML reports come from template files and escape every dynamic text: a `<script>` in a query
id, a run name, a document id, a reason or a label shows as text, never as markup."""

from __future__ import annotations

import re
from string import Template

import numpy as np
import pandas as pd
import pytest

from calibration.report.html import Markup, fill, render_report, template
from calibration.report.regrade_diff import render_diff_html
from calibration.summary import summarize
from grader.regrade.diff import ChangedPair, RegradeDiff

EVIL = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


def _only_data_script(page: str) -> None:
    """The page's one <script> element is the JSON data block; nothing else runs."""
    assert EVIL not in page
    assert re.findall(r"<script\b[^>]*>", page) in (
        [],
        ['<script type="application/json" id="data">'],
    )


def _grades() -> tuple[pd.DataFrame, pd.DataFrame, dict[str, pd.DataFrame]]:
    rng = np.random.default_rng(1)
    rows = []
    for q in range(4):
        qid = EVIL if q == 0 else f"q{q}"
        for d in range(8):
            h = int(rng.integers(0, 4))
            rows.append((qid, f"d{q}_{d}", h, int(np.clip(h + rng.integers(-1, 2), 0, 3))))
    frame = pd.DataFrame(rows, columns=["query_id", "doc_id", "human", "llm"])
    human = frame.rename(columns={"human": "grade"})[["query_id", "doc_id", "grade"]]
    llm = frame.rename(columns={"llm": "grade"})[["query_id", "doc_id", "grade"]]
    runs = {}
    for name, noise in ((EVIL, 0.5), ("plain", 3.0)):
        run = frame[["query_id", "doc_id"]].copy()
        run["score"] = frame["human"] + rng.normal(0, noise, len(frame))
        run["rank"] = run.groupby("query_id")["score"].rank(ascending=False, method="first")
        runs[name] = run.astype({"rank": int})
    return llm, human, runs


@pytest.mark.slow
def test_a_script_in_a_query_id_or_run_name_is_escaped_in_the_calibration_report() -> None:
    llm, human, runs = _grades()
    summary = summarize(llm, human.iloc[:-4], runs=runs, n_bootstrap=0)
    page = render_report(summary, title=f"report {EVIL}")
    _only_data_script(page)
    assert f"<title>report {ESCAPED}</title>" in page
    assert f"<td>{ESCAPED}</td>" in page  # the query id (per query) and the run (systems)
    assert page.count(ESCAPED) >= 4
    assert not re.search(r"\$\{?[a-z_]+", page)  # every template slot filled


def test_a_script_anywhere_in_a_regrade_diff_is_escaped() -> None:
    diff = RegradeDiff(
        n=3,
        compared=2,
        changed=1,
        kappa_between_versions=0.5,
        transition=[[1, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]],
        failed=1,
        pending=0,
        cost=None,
        cost_without_batch=None,
        batch_graded=0,
        changed_pairs=[ChangedPair(EVIL, EVIL, 0, 1, EVIL, f'"{EVIL}"')],
        metric_deltas=[{"run": EVIL, "measure": EVIL, "old": 0.5, "new": 0.6, "delta": 0.1}],
        failed_pairs=[{"query_id": EVIL, "doc_id": EVIL, "error": EVIL}],
    )
    page = render_diff_html(diff, title=EVIL, old_label=EVIL, new_label=EVIL)
    _only_data_script(page)
    assert "<script" not in page
    # title and heading, two labels, 4 cells of the changed pair, 2 of the delta, 3 of the failure
    assert page.count(ESCAPED) == 13
    assert f"&quot;{ESCAPED}&quot;" in page
    for table in ("transition", "metric-deltas", "changed-pairs", "failed-pairs"):
        assert f'<table id="{table}">' in page
    assert '<span id="kappa_between_versions">0.500</span>' in page


def test_fill_escapes_text_passes_markup_and_refuses_a_missing_or_unknown_slot() -> None:
    page = Template("<p>$text</p>$html")
    assert fill(page, text=EVIL, html=Markup("<b>x</b>")) == f"<p>{ESCAPED}</p><b>x</b>"
    assert fill(page, text='a "b" & c', html=Markup("")) == "<p>a &quot;b&quot; &amp; c</p>"
    with pytest.raises(KeyError, match="missing"):
        fill(page, text="a")
    with pytest.raises(KeyError, match="unknown"):
        fill(page, text="a", html=Markup(""), extra="b")


def test_the_page_skeletons_are_package_files_with_the_slots_the_code_fills() -> None:
    calibration = set(template("calibration.html").get_identifiers())
    assert {"title", "css", "verdict", "agreement", "systems", "estimates", "data"} <= calibration
    regrade = set(template("regrade_diff.html").get_identifiers())
    assert {"title", "css", "transition_rows", "changed_pairs", "failed_pairs"} <= regrade
