"""The grading pipeline's ensembles and verification with scripted judges: members and the
lower median recorded, disagreement, `--verify-low`, and output judgments stored under their
own keys and rebuilt without requests."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from grader.judges.ensemble import lower_median
from grader.store.store import Store
from tests.helpers.judgments import stored_judgments
from tests.helpers.scripted_judge import ScriptedJudge, by_doc, grade, make_pairs


async def test_ensemble_records_members_lower_median_and_disagreement(tmp_path: Path) -> None:
    pairs = make_pairs(3)
    a = ScriptedJudge("a", by_doc({"d0": 3, "d1": 0, "d2": None}))
    b = ScriptedJudge("b", by_doc({"d0": 1, "d1": 1, "d2": None}))
    c = ScriptedJudge("c", by_doc({"d0": 2, "d1": None, "d2": None}))
    with Store(tmp_path / "s.db") as store:
        report = await grade(pairs, [a, b, c], store)
        out = {j.doc_id: j for j in report.judgments}
        assert out["d0"].grade == 2 and out["d0"].disagreement == 2.0
        assert out["d0"].judges == {"scripted:a": 3, "scripted:b": 1, "scripted:c": 2}
        # c failed on d1: the aggregate of 0 and 1 is the lower median, 0.
        assert out["d1"].grade == 0 and out["d1"].judges == {
            "scripted:a": 0,
            "scripted:b": 1,
            "scripted:c": None,
        }
        # One ok answer cannot show agreement: the disagreement is unknown, not 0.
        assert out["d1"].disagreement == 1.0
        assert out["d2"].status == "failed" and out["d2"].grade is None
        assert out["d2"].disagreement is None
        assert out["d2"].error is not None and out["d2"].error.type == "EnsembleFailed"
        # Every member's judgment under its own key, and each pair's combined judgment.
        assert store.count() == 12
        stored = store.get_many(j.key for j in report.judgments)
        assert [stored[j.key] for j in report.judgments] == report.judgments
        assert out["d0"].cost == pytest.approx(0.03)


async def test_ensemble_with_one_ok_member_has_unknown_disagreement(tmp_path: Path) -> None:
    pairs = make_pairs(2)
    a = ScriptedJudge("a", by_doc({"d0": 2, "d1": 1}))
    b = ScriptedJudge("b", by_doc({"d0": None, "d1": None}))
    c = ScriptedJudge("c", by_doc({"d0": None, "d1": 1}))
    with Store(tmp_path / "s.db") as store:
        report = await grade(pairs, [a, b, c], store)
    out = {j.doc_id: j for j in report.judgments}
    # 1 ok + 2 failed: the grade is the one answer, but nothing says the judges agree.
    assert out["d0"].grade == 2 and out["d0"].disagreement is None
    # 2 ok (agreeing) + 1 failed: the ok members agree.
    assert out["d1"].grade == 1 and out["d1"].disagreement == 0.0


def test_lower_median_never_invents_a_grade() -> None:
    assert lower_median([3]) == 3
    assert lower_median([0, 3]) == 0
    assert lower_median([1, 2, 3, 3]) == 2
    assert lower_median([3, 1, 2]) == 2


async def test_verify_low_sends_only_low_grades_and_keeps_both(tmp_path: Path) -> None:
    pairs = make_pairs(4)
    primary = ScriptedJudge("m", by_doc({"d0": 0, "d1": 1, "d2": 2, "d3": 3}))
    verifier = ScriptedJudge("v", by_doc({"d0": 2, "d1": None}))
    with Store(tmp_path / "s.db") as store:
        report = await grade(pairs, [primary], store, verify_judge=verifier)
        assert sorted(d for _, d in verifier.calls) == ["d0", "d1"]
        out = {j.doc_id: j for j in report.judgments}
        assert out["d0"].grade == 2  # the verifier answered: its grade is final
        assert out["d0"].verification is not None
        assert out["d0"].verification["primary"]["grade"] == 0
        assert out["d0"].verification["verifier"]["grade"] == 2
        assert out["d1"].grade == 1  # the verifier failed: the first grade stands
        assert out["d1"].verification is not None
        assert out["d1"].verification["verifier"]["status"] == "failed"
        assert out["d2"].verification is None and out["d2"].grade == 2
        again_p = ScriptedJudge("m", by_doc({}))
        again_v = ScriptedJudge("v", by_doc({}))
        report = await grade(pairs, [again_p], store, verify_judge=again_v)
        assert again_p.calls == [] and again_v.calls == [("q1", "d1")]  # failed one retried


async def test_output_judgments_are_stored_under_their_own_keys_and_reused(
    tmp_path: Path,
) -> None:
    pairs = make_pairs(4)
    grades = {"d0": 0, "d1": 1, "d2": 2, "d3": 3}
    a, b = ScriptedJudge("a", by_doc(grades)), ScriptedJudge("b", by_doc(grades))
    verifier = ScriptedJudge("v", by_doc({"d0": 3, "d1": 1}))
    with Store(tmp_path / "s.db") as store:
        report = await grade(pairs, [a, b], store, verify_judge=verifier)
        out = {j.doc_id: j for j in report.judgments}
        member_keys = {j.key for j in stored_judgments(store) if j.judges is None}
        assert all(j.key not in member_keys for j in report.judgments)
        verified = out["d0"]
        assert verified.grade == 3 and verified.verification is not None
        combined_key = verified.verification["primary"]["key"]
        assert combined_key != verified.key
        (combined,) = store.get_many([combined_key]).values()
        assert combined.judges is not None and combined.grade == 0
        assert combined.verification is None
        # Stored: 4 pairs x (a, b, combined) + 2 low pairs x (verifier, verified).
        assert store.count() == 16
        stored = store.get_many(j.key for j in report.judgments)
        assert [stored[j.key] for j in report.judgments] == report.judgments
        # A rerun sends nothing, writes nothing and gives the stored outputs back.
        before = {j.key: j.created_at for j in stored_judgments(store)}
        again = [ScriptedJudge(n, by_doc({})) for n in ("a", "b", "v")]
        rerun = await grade(pairs, again[:2], store, verify_judge=again[2])
        assert all(j.calls == [] for j in again)
        assert rerun.judgments == report.judgments
        assert {j.key: j.created_at for j in stored_judgments(store)} == before


async def test_a_missing_output_judgment_is_rebuilt_without_requests(tmp_path: Path) -> None:
    pairs = make_pairs(3)
    a, b = ScriptedJudge("a", by_doc({"d0": 0})), ScriptedJudge("b", by_doc({"d0": 2}))
    with Store(tmp_path / "s.db") as store:
        report = await grade(pairs, [a, b], store)
    # As a store from before output judgments were stored (or a lost commit) would look.
    with sqlite3.connect(tmp_path / "s.db") as conn:
        conn.execute("DELETE FROM judgments WHERE json_extract(payload, '$.judges') IS NOT NULL")
    with Store(tmp_path / "s.db") as store:
        assert store.count() == 6
        again = [ScriptedJudge("a", by_doc({})), ScriptedJudge("b", by_doc({}))]
        rerun = await grade(pairs, again, store)
        assert all(j.calls == [] for j in again)
        assert store.count() == 9
        stored = store.get_many(j.key for j in rerun.judgments)
        assert [stored[j.key].grade for j in rerun.judgments] == [j.grade for j in report.judgments]
