"""Pairs to grade: depth in trec_eval order, dedupe across runs, skip-judged, missing ids."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.errors import InputError
from grader.grading.pairs import PairSelection, pairs_to_grade
from grader.models import Doc, Query
from grader.spelling import command_line

QUERIES = {q: Query(query_id=q, text=f"text of {q}") for q in ("q1", "q2")}
DOCS = {d: Doc(doc_id=d, text=f"text of {d}") for d in ("a", "b", "c", "d", "e")}


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def ids(selection: PairSelection) -> list[tuple[str, str]]:
    return [(p.query.query_id, p.doc.doc_id) for p in selection.pairs]


def test_top_depth_in_trec_eval_order_not_the_rank_column(tmp_path: Path) -> None:
    # The rank column says a, b, c; the scores say c first, then the a/b tie broken by doc id
    # descending (b before a).
    run = write(
        tmp_path / "r1",
        ["q1 Q0 a 1 1.0 t", "q1 Q0 b 2 1.0 t", "q1 Q0 c 3 5.0 t", "q2 Q0 d 1 2.0 t"],
    )
    selection = pairs_to_grade([run], QUERIES, DOCS, depth=2)
    assert ids(selection) == [("q1", "c"), ("q1", "b"), ("q2", "d")]
    assert selection.candidates == 3


def test_deduplicated_across_runs_and_judged_pairs_skipped(tmp_path: Path) -> None:
    r1 = write(tmp_path / "r1", ["q1 Q0 a 1 3 t", "q1 Q0 b 2 2 t"])
    r2 = write(tmp_path / "r2", ["q1 Q0 b 1 9 u", "q1 Q0 c 2 8 u", "q2 Q0 e 1 1 u"])
    qrels = write(tmp_path / "qrels", ["q1 0 c 2"])
    selection = pairs_to_grade([r1, r2], QUERIES, DOCS, depth=10, skip_judged=[qrels])
    assert ids(selection) == [("q1", "a"), ("q1", "b"), ("q2", "e")]
    assert selection.duplicates == 1
    assert selection.judged == 1


def test_missing_ids_are_one_error_with_count_and_first_ids(tmp_path: Path) -> None:
    lines = [f"q1 Q0 x{i} {i} {100 - i} t" for i in range(8)] + ["q9 Q0 a 1 1 t"]
    run = write(tmp_path / "r1", lines)
    with pytest.raises(InputError) as info:
        pairs_to_grade([run], QUERIES, DOCS, depth=10)
    message = str(info.value)
    assert "9 pair(s)" in message
    assert "8 unknown doc id(s) (x0, x1, x2, x3, x4, ...)" in message
    assert "1 unknown query id(s) (q9)" in message
    assert "skip_missing=True" in message and str(run) in message  # a Python caller's fix
    with command_line(), pytest.raises(InputError) as info:
        pairs_to_grade([run], QUERIES, DOCS, depth=10)
    assert "--skip-missing" in str(info.value)  # the command's


def test_skip_missing_counts_what_it_left_out(tmp_path: Path) -> None:
    run = write(tmp_path / "r1", ["q1 Q0 a 1 3 t", "q1 Q0 zz 2 2 t", "q9 Q0 b 1 1 t"])
    selection = pairs_to_grade([run], QUERIES, DOCS, skip_missing=True)
    assert ids(selection) == [("q1", "a")]
    assert selection.missing == 2
    assert selection.missing_doc_ids == ["zz"] and selection.missing_query_ids == ["q9"]


def test_depth_must_be_positive(tmp_path: Path) -> None:
    run = write(tmp_path / "r1", ["q1 Q0 a 1 3 t"])
    with pytest.raises(InputError, match=r"^depth must be at least 1"):
        pairs_to_grade([run], QUERIES, DOCS, depth=0)
    with command_line(), pytest.raises(InputError, match=r"^--depth must be at least 1"):
        pairs_to_grade([run], QUERIES, DOCS, depth=0)


def test_skip_judged_takes_human_grades_csv_and_ungraded_rows_do_not_count(tmp_path: Path) -> None:
    run = write(tmp_path / "r1", ["q1 Q0 a 1 3 t", "q1 Q0 b 2 2 t", "q1 Q0 c 3 1 t"])
    human = write(
        tmp_path / "human.csv", ["query_id,doc_id,grade,annotator", "q1,a,0,ann", "q1,b,,ann"]
    )
    selection = pairs_to_grade([run], QUERIES, DOCS, depth=10, skip_judged=[human])
    # a was graded (even as 0) and is skipped; b's grade is still empty, so it is graded.
    assert ids(selection) == [("q1", "b"), ("q1", "c")]
    assert selection.judged == 1
