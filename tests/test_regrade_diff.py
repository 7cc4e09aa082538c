"""The diff between judgment versions: transition, kappa (checked against scikit-learn), cost."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.metrics import cohen_kappa_score

from grader.models import Judgment, JudgmentError
from grader.regrade.diff import VersionPair, diff_versions


def _j(key: str, grade: int | None, reason: str = "r", cost: float | None = 0.01) -> Judgment:
    if grade is None:
        return Judgment(
            query_id="q",
            doc_id=key,
            status="failed",
            judge="j",
            key=key,
            cost=cost,
            error=JudgmentError(type="InvalidReply", message="grade 7 out of range"),
        )
    return Judgment(
        query_id="q",
        doc_id=key,
        grade=grade,
        status="ok",
        reason=reason,
        judge="j",
        key=key,
        cost=cost,
    )


def test_hand_computed_diff() -> None:
    pairs = [
        VersionPair("q", "a", _j("oa", 0), _j("na", 0)),
        VersionPair("q", "b", _j("ob", 1, "old says 1"), _j("nb", 3, "new says 3")),
        VersionPair("q", "c", _j("oc", 2), _j("nc", 2)),
        VersionPair("q", "d", _j("od", 3), _j("nd", None)),
        VersionPair("q", "e", _j("oe", 3), None),
    ]
    diff = diff_versions(pairs, batch_keys={"na", "nb"}, batch_discount=0.5)
    assert diff.n == 5
    assert diff.compared == 3
    assert diff.changed == 1
    assert diff.failed == 1
    assert diff.pending == 1
    assert diff.transition[1][3] == 1 and diff.transition[0][0] == 1 and diff.transition[2][2] == 1
    assert sum(map(sum, diff.transition)) == 3
    change = diff.changed_pairs[0]
    assert (change.doc_id, change.old_grade, change.new_grade) == ("b", 1, 3)
    assert (change.old_reason, change.new_reason) == ("old says 1", "new says 3")
    assert diff.failed_pairs[0]["error"].startswith("InvalidReply")
    # 4 new judgments at 0.01; two went through the batch at half price
    assert diff.cost == pytest.approx(0.04)
    assert diff.cost_without_batch == pytest.approx(0.06)
    # p_o = 2/3; p_e = (1/3*1/3)[0] + 0 + (1/3*1/3)[2] = 2/9 -> (2/3-2/9)/(7/9) = 4/7
    assert diff.kappa_between_versions == pytest.approx(4 / 7)
    json_keys = diff.to_json().keys()
    assert {"n", "changed", "kappa_between_versions", "transition", "failed", "cost"} <= json_keys
    assert "cost_without_batch" in json_keys


def cohen_kappa(old: list[int], new: list[int]) -> float | None:
    """The diff's kappa between versions of pairs graded `old` then `new`."""
    pairs = [
        VersionPair("q", f"d{i}", _j(f"o{i}", a), _j(f"n{i}", b))
        for i, (a, b) in enumerate(zip(old, new, strict=True))
    ]
    return diff_versions(pairs).kappa_between_versions


def test_kappa_undefined_when_nothing_to_compare() -> None:
    assert cohen_kappa([], []) is None
    assert cohen_kappa([2, 2], [2, 2]) is None


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 3)), min_size=1, max_size=60))
def test_kappa_matches_scikit_learn(pairs: list[tuple[int, int]]) -> None:
    old = [a for a, _ in pairs]
    new = [b for _, b in pairs]
    ours = cohen_kappa(old, new)
    if ours is None:
        assert len(set(old) | set(new)) == 1
    else:
        assert ours == pytest.approx(cohen_kappa_score(old, new, labels=[0, 1, 2, 3]), abs=1e-9)
