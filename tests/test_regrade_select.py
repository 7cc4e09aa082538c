"""Regrade selection over stored versions: criteria parsing, pair lists, which judgment is old."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from grader.errors import InputError
from grader.keys import content_key
from grader.models import Doc, Judgment, PromptRef, Query
from grader.regrade.run import work
from grader.regrade.selection import (
    Criterion,
    parse_selection,
    read_pair_list,
    select_candidates,
)
from grader.store.store import Store
from grader.store.writing import text_rows

NEW_FP = {"judge": "openai:new", "prompt_sha": "n" * 64}


def _put(store: Store, doc: str, grade: int, version: str, **extra: Any) -> Judgment:
    q = Query(query_id="q1", text="query one")
    d = Doc(doc_id=doc, text=f"text of {doc}")
    fp = {"judge": "openai:m", "v": version}
    j = Judgment(
        query_id="q1", doc_id=doc, grade=grade, status="ok", judge="openai:m",
        prompt=PromptRef(name="passage", version=version, sha256=version * 64),
        key=content_key(fp, q.text, d.text), **extra,
    )  # fmt: skip
    store.put_many([(j, fp)])
    store.put_text_rows(*text_rows([q], [d]))
    return j


def test_parse_selection_forms(tmp_path: Path) -> None:
    sample = tmp_path / "s.qrels"
    sample.write_text("q1 0 d1 2\nq2 0 d9 0\n", encoding="utf-8")
    parsed = parse_selection(["prompt=passage@1", "grade<=1", "sample", str(sample)])
    assert [c.kind for c in parsed] == ["prompt", "grade<=", "sample"]
    assert parsed[1].value == 1
    assert parsed[2].value == {("q1", "d1"), ("q2", "d9")}
    assert parse_selection([]) == [Criterion("all")]
    for bad in (["grade<=7"], ["sample"], ["prompt="], ["everything"]):
        with pytest.raises(InputError):
            parse_selection(bad)


def test_pair_lists_from_csv_run_and_two_columns(tmp_path: Path) -> None:
    csv = tmp_path / "s.csv"
    csv.write_text("qid,docid,grade\nq1,d1,\n", encoding="utf-8")
    run = tmp_path / "r.run"
    run.write_text("q1 Q0 d2 1 9.5 bm25\n", encoding="utf-8")
    two = tmp_path / "p.txt"
    two.write_text("q1 d3\n", encoding="utf-8")
    assert read_pair_list(csv) == {("q1", "d1")}
    assert read_pair_list(run) == {("q1", "d2")}
    assert read_pair_list(two) == {("q1", "d3")}
    bad = tmp_path / "bad.txt"
    bad.write_text("q1 d3 x\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.txt:1"):
        read_pair_list(bad)


def test_a_csv_row_with_extra_or_missing_cells_keeps_its_columns(tmp_path: Path) -> None:
    """Extra cells (every row, or some) never shift the columns; a row short of doc_id is an
    error naming its line, not a pair with doc_id "None"."""
    every = tmp_path / "every.csv"
    every.write_text("query_id,doc_id\nq1,d1,extra\nq2,d2,x\n", encoding="utf-8")
    some = tmp_path / "some.csv"
    some.write_text("query_id,doc_id\nq1,d1\nq2,d2,x\n", encoding="utf-8")
    assert read_pair_list(every) == read_pair_list(some) == {("q1", "d1"), ("q2", "d2")}
    short = tmp_path / "short.csv"
    short.write_text("query_id,doc_id\nq1,d1\nq2\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"short.csv:3.*no doc_id"):
        read_pair_list(short)


def test_old_is_latest_non_new_version_and_prompt_filter_picks_it(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        _put(store, "d1", 0, "1")
        _put(store, "d1", 2, "2")  # later: the default old side
        picked = select_candidates(store, parse_selection(["all"]), NEW_FP)
        assert [(c.doc.doc_id, c.old.grade) for c in picked] == [("d1", 2)]
        picked = select_candidates(store, parse_selection(["prompt=passage@1"]), NEW_FP)
        assert [(c.doc.doc_id, c.old.grade) for c in picked] == [("d1", 0)]
        for sha in ("1" * 64, "sha256:" + "1" * 64):  # the prompt's sha, bare or tagged
            picked = select_candidates(store, parse_selection([f"prompt={sha}"]), NEW_FP)
            assert [(c.doc.doc_id, c.old.grade) for c in picked] == [("d1", 0)]
        assert select_candidates(store, parse_selection(["grade<=1"]), NEW_FP) == []
        # the new version itself is never an old side
        same = {"judge": "openai:m", "v": "2"}
        picked = select_candidates(store, parse_selection(["all"]), same)
        assert [c.old.grade for c in picked] == [0]
        assert work(store, picked, set())[0] == []  # its new key is already ok in the store


def test_disagreement_selects_ensembles_and_verifications_that_disagree(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        _put(store, "d1", 1, "1", disagreement=2.0, judges={"a": 1, "b": 3})
        _put(store, "d2", 1, "1", disagreement=0.0, judges={"a": 1, "b": 1})
        _put(
            store, "d3", 2, "1",
            verification={"primary": {"grade": 0}, "verifier": {"grade": 2}},
        )  # fmt: skip
        _put(store, "d4", 3, "1")
        picked = select_candidates(store, parse_selection(["disagreement"]), NEW_FP)
        assert [c.doc.doc_id for c in picked] == ["d1", "d3"]


def test_a_failed_judgment_of_the_same_version_is_retried(tmp_path: Path) -> None:
    from grader.models import JudgmentError

    q = Query(query_id="q1", text="query one")
    d = Doc(doc_id="d1", text="text of d1")
    fp = {"judge": "openai:m", "v": "1"}
    failed = Judgment(
        query_id="q1",
        doc_id="d1",
        status="failed",
        judge="openai:m",
        key=content_key(fp, q.text, d.text),
        error=JudgmentError(type="InvalidReply", message="malformed JSON"),
    )
    with Store(tmp_path / "s.db") as store:
        store.put_many([(failed, fp)])
        store.put_text_rows(*text_rows([q], [d]))
        _put(store, "d2", 1, "1")  # an ok pair of the same version: nothing to retry
        picked = select_candidates(store, parse_selection(["failed"]), fp)
        assert [(c.doc.doc_id, c.old.status, c.new_key) for c in picked] == [
            ("d1", "failed", failed.key)
        ]
        assert [c.doc.doc_id for c in work(store, picked, set())[0]] == ["d1"]
        assert [c.doc.doc_id for c in select_candidates(store, parse_selection(["all"]), fp)] == [
            "d1"
        ]
