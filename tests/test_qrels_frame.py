"""One judgments -> qrels frame: grade --qrels-out, regrade --qrels-out, regrade's metric deltas and
the blind import's qrels all come from `grader.io.judgments.qrels_frame`."""

from __future__ import annotations

from pathlib import Path

from calibration.spotcheck.blind import HumanGrade, write_human_grades
from grader.io.judgments import qrels_frame
from grader.io.trec import read_qrels, write_qrels
from grader.models import Judgment, JudgmentError
from grader.regrade.diff import VersionPair, version_qrels


def _ok(qid: str, did: str, grade: int) -> Judgment:
    return Judgment(
        query_id=qid, doc_id=did, grade=grade, status="ok", judge="j", key=f"{qid}{did}"
    )


def _failed(qid: str, did: str) -> Judgment:
    return Judgment(
        query_id=qid,
        doc_id=did,
        status="failed",
        judge="j",
        key=f"{qid}{did}",
        error=JudgmentError(type="Timeout", message="no answer"),
    )


def test_failed_judgments_stay_unjudged_never_zero(tmp_path: Path) -> None:
    judgments = [_ok("q1", "b", 3), _failed("q1", "a"), _ok("q2", "a", 0), _ok("10", "c", 1)]
    frame = qrels_frame(judgments)
    assert frame.values.tolist() == [["q1", "b", 3], ["q2", "a", 0], ["10", "c", 1]]
    assert str(frame["grade"].dtype) == "int64"
    path = tmp_path / "out.qrels"
    write_qrels(path, frame)
    assert path.read_text() == "q1 0 b 3\nq2 0 a 0\n10 0 c 1\n"
    assert (
        read_qrels(path)[["query_id", "doc_id", "grade"]].values.tolist() == frame.values.tolist()
    )


def test_no_grades_is_an_empty_frame_with_the_columns() -> None:
    frame = qrels_frame([_failed("q1", "a")])
    assert list(frame.columns) == ["query_id", "doc_id", "grade"] and frame.empty


def test_people_grades_and_regrade_versions_use_it(tmp_path: Path) -> None:
    path = tmp_path / "h.qrels"
    write_human_grades(path, [HumanGrade("q1", "a", 2, "ann"), HumanGrade("q1", "b", 0)])
    assert path.read_text() == "q1 0 a 2\nq1 0 b 0\n"
    pairs = [
        VersionPair("q1", "a", _ok("q1", "a", 1), _ok("q1", "a", 3)),
        VersionPair("q1", "b", _ok("q1", "b", 2), _failed("q1", "b")),
        VersionPair("q1", "c", _ok("q1", "c", 2), None),
        VersionPair("q2", "d", None, _ok("q2", "d", 2)),
    ]
    old, new = version_qrels(pairs)
    assert old.values.tolist() == [["q1", "a", 1]] and new.values.tolist() == [["q1", "a", 3]]
