"""A pair whose old judgment failed and whose new one is ok is counted (`no_old_grade`) and shown:
`regrade --select failed` must not report every count as 0."""

from __future__ import annotations

from typing import Literal

from grader.cli.regrade_output import render_table
from grader.models import Judgment, JudgmentError
from grader.regrade.diff import VersionPair, diff_versions


def _j(status: Literal["ok", "failed"], grade: int | None) -> Judgment:
    error = JudgmentError(type="InvalidReply", message="x") if status == "failed" else None
    return Judgment(
        query_id="q", doc_id="d", status=status, grade=grade, judge="j", key="k", error=error
    )


def test_a_failed_old_judgment_regraded_ok_is_counted() -> None:
    diff = diff_versions([VersionPair("q", "d", _j("failed", None), _j("ok", 2))])
    assert (diff.n, diff.compared, diff.failed, diff.pending) == (1, 0, 0, 0)
    assert diff.no_old_grade == 1
    assert "graded where the old had no grade 1" in render_table(diff)
