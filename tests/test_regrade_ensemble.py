"""Regrading stores written by an ensemble or `--verify-low`, end to end through the CLI against
the fake server: the old side of each pair is its output judgment (the combined or verified
one), and `--select disagreement` picks exactly the pairs whose judges disagreed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from grader.cli.main import main
from grader.io.judgments import read_judgments
from grader.keys import content_key
from grader.models import Doc, Judgment, Query
from grader.regrade.selection import parse_selection, select_candidates
from grader.store.store import Store
from grader.store.writing import text_rows
from tests.fakeserver import FakeServer, default_grade
from tests.grade_data import GradeFiles, write_grade_files


def _text(body: dict[str, Any]) -> str:
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    return str(users[0].get("content", "")) if users else ""


def _split_models(body: dict[str, Any]) -> int:
    """model-b differs from model-a on about half the pairs; the new judge has its own grade."""
    grade = default_grade(body)
    model = body.get("model")
    if model == "model-b" and hashlib.sha256(_text(body).encode()).digest()[1] % 2:
        return (grade + 1) % 4
    if model == "model-new":
        return 3 - grade
    return grade


def _regrade(db: Path, url: str, *extra: str, capsys: pytest.CaptureFixture[str]) -> Any:
    args = ["regrade", "--store", str(db), "--prompt", "passage", "--model", "model-new"]
    code = main([*args, "--base-url", url, "--format", "json", "--quiet", *extra])
    assert code == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
@pytest.mark.usefixtures("llm_env")
def test_regrade_after_an_ensemble_selects_disagreements_against_the_combined_grade(
    fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files: GradeFiles = write_grade_files(tmp_path)
    fake_server.grade_fn = _split_models
    db, out = tmp_path / "s.db", tmp_path / "ens.jsonl"
    grade = files.args("--base-url", fake_server.base_url, "--store", db, "--quiet")
    grade += ["--model", "model-a", "--model", "model-b", "--out", str(out)]
    assert main(grade) == 0
    combined = {(j.query_id, j.doc_id): j for j in read_judgments(out)}
    disagreeing = {p for p, j in combined.items() if j.disagreement}
    assert 0 < len(disagreeing) < files.n_pairs  # the data makes both kinds
    assert main(grade) == 0  # a rerun sends nothing and changes nothing
    assert fake_server.counts["requests"] == 2 * files.n_pairs
    assert {(j.query_id, j.doc_id): j for j in read_judgments(out)} == combined
    capsys.readouterr()
    with Store(db) as store:  # the old side of every pair is its combined judgment
        before = select_candidates(store, parse_selection(["all"]), {"judge": "other"})
    assert {(c.old.query_id, c.old.doc_id): c.old for c in before} == combined

    diff = _regrade(db, fake_server.base_url, "--select", "disagreement", capsys=capsys)
    assert diff["n"] == diff["selected"] == diff["compared"] == len(disagreeing)
    assert fake_server.counts["requests"] == 2 * files.n_pairs + len(disagreeing)
    # The old side is the combined grade: rows of the transition are the combined grades.
    old_hist = [0, 0, 0, 0]
    for pair in disagreeing:
        old_hist[combined[pair].grade or 0] += 1
    assert [sum(row) for row in diff["transition"]] == old_hist
    for changed in diff["changed_pairs"]:
        pair = (changed["query_id"], changed["doc_id"])
        assert pair in disagreeing and changed["old_grade"] == combined[pair].grade
    # Now the newest output of the regraded pairs is model-new's; the others keep the combined.
    with Store(db) as store:
        picked = select_candidates(store, parse_selection(["all"]), {"judge": "other"})
    assert len(picked) == files.n_pairs
    for c in picked:
        pair = (c.old.query_id, c.old.doc_id)
        if pair in disagreeing:
            assert c.old.judges is None and c.old.prompt is not None
            model_a = (combined[pair].judges or {})["openai:model-a"]
            assert model_a is not None and c.old.grade == 3 - model_a
        else:
            assert c.old == combined[pair]


def _judgment(store: Store, doc: str, grade: int | None, fp: dict[str, Any], **extra: Any) -> str:
    q = Query(query_id="q1", text="query one")
    d = Doc(doc_id=doc, text=f"text of {doc}")
    key = content_key(fp, q.text, d.text)
    status = "ok" if grade is not None else "failed"
    error = None if grade is not None else {"type": "Boom", "message": "no"}
    j = Judgment.model_validate(
        {"query_id": "q1", "doc_id": doc, "grade": grade, "status": status, "judge": str(fp),
         "key": key, "error": error, **extra}
    )  # fmt: skip
    store.put_many([(j, fp)])
    store.put_text_rows(*text_rows([q], [d]))
    return key


def test_a_failed_member_or_verifier_counts_as_disagreement(tmp_path: Path) -> None:
    a, b, v = {"judge": "a"}, {"judge": "b"}, {"judge": "v"}
    ens = {"ensemble": [a, b], "aggregate": "lower-median"}
    with Store(tmp_path / "s.db") as store:
        # d1: b failed; the combined judgment has one ok member, so its disagreement is None.
        _judgment(store, "d1", 2, a)
        _judgment(store, "d1", None, b)
        _judgment(store, "d1", 2, ens, judges={"a": 2, "b": None})
        # d2: both agree.
        _judgment(store, "d2", 1, a)
        _judgment(store, "d2", 1, b)
        _judgment(store, "d2", 1, ens, judges={"a": 1, "b": 1}, disagreement=0.0)
        # d3: single judge a, verified; the verifier failed (a newer, failed row).
        first = _judgment(store, "d3", 0, a)
        failed = _judgment(store, "d3", None, v)
        verification = {
            "rule": "verifier-grade-when-ok",
            "primary": {"key": first, "status": "ok", "grade": 0},
            "verifier": {"key": failed, "status": "failed", "grade": None},
        }
        final_fp = {"verified": a, "verifier": v, "rule": "verifier-grade-when-ok"}
        _judgment(store, "d3", 0, final_fp, verification=verification)
        # The verifier row is written last: the newest row, but never the old side.
        _judgment(store, "d3", None, v)
        new = {"judge": "new"}
        picked = select_candidates(store, parse_selection(["disagreement"]), new)
        assert [c.doc.doc_id for c in picked] == ["d1", "d3"]
        everything = {c.doc.doc_id: c.old for c in select_candidates(store, [], new)}
    assert everything["d1"].judges == {"a": 2, "b": None}
    assert everything["d2"].judges == {"a": 1, "b": 1}
    assert everything["d3"].verification is not None and everything["d3"].grade == 0
