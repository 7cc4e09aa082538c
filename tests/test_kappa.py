"""One Cohen's kappa: the metrics core's, used by calibrate, regrade's diff and the lexical fit,
cross-checked against scikit-learn on random grades of every scale size and weighting."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

import calibration.stats.agreement as calibration_agreement
import grader.judges.lexical.fit as lexical_fit
import grader.regrade.diff as regrade_diff
from grader.metrics.kappa import cohen_kappa, confusion_matrix, grouped_confusion, kappa
from grader.models import Judgment


@pytest.mark.slow
@pytest.mark.parametrize("size", [2, 3, 4, 5])
@pytest.mark.parametrize("weighting", ["none", "linear", "quadratic"])
def test_kappa_equals_sklearn_for_every_scale(size: int, weighting: str) -> None:
    sk = None if weighting == "none" else weighting
    rng = np.random.default_rng(size)
    for _ in range(20):
        n = int(rng.integers(2, 200))
        a = rng.integers(0, size, n)
        b = np.clip(a + rng.integers(-1, 2, n), 0, size - 1)
        w = rng.uniform(0.1, 5.0, n)
        labels = list(range(size))
        expected = cohen_kappa_score(a, b, weights=sk, labels=labels)
        expected_w = cohen_kappa_score(a, b, weights=sk, labels=labels, sample_weight=w)
        if math.isnan(expected):
            assert math.isnan(cohen_kappa(a, b, size, weighting=weighting))
            continue
        assert cohen_kappa(a, b, size, weighting=weighting) == pytest.approx(expected, abs=1e-12)
        got_w = cohen_kappa(a, b, size, weights=w, weighting=weighting)
        assert got_w == pytest.approx(expected_w, abs=1e-12)


def test_stacked_matrices_give_each_matrix_its_kappa() -> None:
    rng = np.random.default_rng(7)
    groups = rng.integers(0, 6, 300)
    a = rng.integers(0, 4, 300)
    b = np.clip(a + rng.integers(-1, 2, 300), 0, 3)
    stack = grouped_confusion(groups, 6, a, b, 4)
    together = kappa(stack, "quadratic")
    for g in range(6):
        mask = groups == g
        alone = cohen_kappa_score(a[mask], b[mask], weights="quadratic", labels=[0, 1, 2, 3])
        assert together[g] == pytest.approx(alone, abs=1e-12)
        assert np.array_equal(stack[g], confusion_matrix(a[mask], b[mask], 4))


def test_undefined_kappa_is_nan_not_a_number_that_lies() -> None:
    assert math.isnan(cohen_kappa([2, 2, 2], [2, 2, 2], 4))
    assert math.isnan(cohen_kappa([], [], 4))
    with pytest.raises(ValueError, match=r"0\.\.3"):
        confusion_matrix([0, 4], [0, 1], 4)
    with pytest.raises(ValueError, match="weighting"):
        kappa(np.eye(4), "cubic")


def _ok(key: str, grade: int) -> Judgment:
    return Judgment(query_id="q", doc_id=key, grade=grade, status="ok", judge="j", key=key)


def test_calibration_regrade_and_the_lexical_fit_share_it() -> None:
    old = [0, 1, 2, 3, 3, 1, 0, 2]
    new = [0, 1, 2, 2, 3, 0, 0, 2]
    versions = [
        regrade_diff.VersionPair("q", f"d{i}", _ok(f"old{i}", a), _ok(f"new{i}", b))
        for i, (a, b) in enumerate(zip(old, new, strict=True))
    ]
    between = regrade_diff.diff_versions(versions).kappa_between_versions
    assert between == pytest.approx(cohen_kappa_score(old, new))
    human = [0, 1, 2, 3, 3, 1, 0, 2]
    assert calibration_agreement.cohen_kappa(human, new, weighting="linear") == pytest.approx(
        cohen_kappa_score(human, new, weights="linear", labels=[0, 1, 2, 3])
    )


@pytest.mark.slow
def test_lexical_fit_reaches_sklearns_best_quadratic_kappa() -> None:
    """The threshold search's kappa is sklearn's: brute force over the cut points agrees."""
    rng = np.random.default_rng(3)
    scores = rng.integers(0, 12, 60) / 4.0
    grades = np.clip((scores + rng.normal(scale=0.7, size=60)).round(), 0, 3).astype(int)
    fitted = lexical_fit.fit_lexical_thresholds(scores, grades)
    got = cohen_kappa_score(grades, lexical_fit.grades_for(scores, fitted), weights="quadratic")
    cuts = np.append(np.unique(scores), np.inf)  # a cut above every score leaves a grade unused
    best = -1.0
    for i, t1 in enumerate(cuts):
        for j in range(i, len(cuts)):
            for t3 in cuts[j:]:
                pred = lexical_fit.grades_for(scores, (t1, cuts[j], t3))
                if len(set(pred)) > 1:
                    k = cohen_kappa_score(grades, pred, weights="quadratic", labels=[0, 1, 2, 3])
                    best = max(best, k)
    assert got == pytest.approx(best, abs=1e-9)
