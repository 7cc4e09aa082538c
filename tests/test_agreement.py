"""Agreement figures: hand-computed cases, degenerate inputs, and cross-checks against
scikit-learn, the krippendorff package and the TREC DL 2019 reference kappas."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import krippendorff
import numpy as np
import numpy.typing as npt
import pytest
from sklearn.metrics import cohen_kappa_score

from calibration.stats.agreement import agreement, agreement_intervals, scalar_figures
from grader.metrics.kappa import cohen_kappa, grouped_confusion
from grader.metrics.kappa import confusion_matrix as _confusion_matrix
from tests.helpers.fill_data import DATA as SHARED_DL2019

DATA = SHARED_DL2019
SK_WEIGHTS = {"none": None, "linear": "linear", "quadratic": "quadratic"}
ALPHA_KEYS = {"ordinal": "krippendorff_alpha_ordinal", "interval": "krippendorff_alpha_interval"}
KAPPA_KEYS = {
    "none": "cohen_kappa",
    "linear": "weighted_kappa_linear",
    "quadratic": "weighted_kappa_quadratic",
}


def confusion_matrix(
    human: npt.ArrayLike, llm: npt.ArrayLike, weights: npt.ArrayLike | None = None
) -> np.ndarray:
    """The 4x4 confusion matrix `agreement` builds its figures from."""
    return _confusion_matrix(human, llm, 4, weights)


def _random_grades(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 400))
    human = rng.integers(0, 4, n)
    llm = np.clip(human + rng.integers(-1, 3, n), 0, 3)
    return human, llm, rng.uniform(0.1, 10.0, n)


def test_hand_computed_small_case() -> None:
    human = [0, 0, 1, 2, 3, 3]
    llm = [0, 1, 1, 3, 3, 2]
    out = agreement(human, llm)
    assert out["n"] == 6
    assert out["exact_agreement"] == pytest.approx(3 / 6)
    assert out["within_one"] == pytest.approx(1.0)
    assert out["mean_bias"] == pytest.approx((0 + 1 + 0 + 1 + 0 - 1) / 6)
    # p_o = 0.5; margins human (2,1,1,2), llm (1,2,1,2): p_e = (2+2+1+4)/36 = 0.25
    assert out["cohen_kappa"] == pytest.approx((0.5 - 0.25) / 0.75)
    assert out["confusion"] == [[1, 1, 0, 0], [0, 1, 0, 0], [0, 0, 0, 1], [0, 0, 1, 1]]
    assert out["per_grade"]["1"] == {
        "precision": 0.5,
        "recall": 1.0,
        "human_count": 1.0,
        "llm_count": 2.0,
    }
    # binarised at 2: human (0,0,0,1,1,1) vs llm (0,0,0,1,1,1): perfect
    assert out["binary_kappa"]["2"] == pytest.approx(1.0)
    assert out["weighted"] is False


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("weighting", ["none", "linear", "quadratic"])
def test_kappa_matches_scikit_learn(seed: int, weighting: str) -> None:
    human, llm, w = _random_grades(seed)
    sk = SK_WEIGHTS[weighting]
    expected = cohen_kappa_score(human, llm, weights=sk, labels=[0, 1, 2, 3])
    got = agreement(human, llm)[KAPPA_KEYS[weighting]]
    assert got == pytest.approx(expected, abs=1e-12)
    assert cohen_kappa(human, llm, 4, weighting=weighting) == pytest.approx(expected, abs=1e-12)
    expected_w = cohen_kappa_score(human, llm, weights=sk, labels=[0, 1, 2, 3], sample_weight=w)
    got_w = agreement(human, llm, w)[KAPPA_KEYS[weighting]]
    assert got_w == pytest.approx(expected_w, abs=1e-12)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("level", ["ordinal", "interval"])
def test_alpha_matches_krippendorff_package(
    seed: int, level: Literal["ordinal", "interval"]
) -> None:
    human, llm, _ = _random_grades(seed)
    expected = krippendorff.alpha(np.vstack([human, llm]), level_of_measurement=level)
    assert agreement(human, llm)[ALPHA_KEYS[level]] == pytest.approx(expected, abs=1e-12)


def test_integer_weights_equal_repeating_pairs() -> None:
    human, llm, _ = _random_grades(3)
    reps = np.random.default_rng(9).integers(1, 4, human.size)
    weighted = agreement(human, llm, weights=reps.astype(float))
    repeated = agreement(np.repeat(human, reps), np.repeat(llm, reps))
    assert weighted["weighted"] is True
    assert weighted["weighted_n"] == pytest.approx(reps.sum())
    for key in ("cohen_kappa", "weighted_kappa_quadratic", "mean_bias", "exact_agreement"):
        assert weighted[key] == pytest.approx(repeated[key], abs=1e-12)
    # alpha's (n - 1) factor uses the total weight, so repeating pairs is exactly weighting them
    assert weighted["krippendorff_alpha_ordinal"] == pytest.approx(
        repeated["krippendorff_alpha_ordinal"], abs=1e-12
    )


def test_weights_change_the_figures_towards_heavy_pairs() -> None:
    human = np.array([0, 0, 3, 3])
    llm = np.array([0, 0, 0, 0])
    heavy_disagreement = np.array([1.0, 1.0, 10.0, 10.0])
    assert agreement(human, llm)["mean_bias"] == pytest.approx(-1.5)
    assert agreement(human, llm, heavy_disagreement)["mean_bias"] == pytest.approx(-60 / 22)


def test_undefined_kappa_is_none_not_a_number() -> None:
    out = agreement([2, 2, 2], [2, 2, 2])
    assert out["exact_agreement"] == 1.0
    assert out["cohen_kappa"] is None
    assert out["krippendorff_alpha_ordinal"] is None


def test_out_of_range_grades_and_bad_weights_are_refused() -> None:
    with pytest.raises(ValueError, match=r"0\.\.3"):
        confusion_matrix([0, 4], [0, 1])
    with pytest.raises(ValueError, match="one value per pair"):
        confusion_matrix([0, 1], [0, 1], weights=[1.0])
    with pytest.raises(ValueError, match="non-negative"):
        confusion_matrix([0, 1], [0, 1], weights=[1.0, -1.0])


def test_stacked_matrices_give_the_same_figures_as_one_at_a_time() -> None:
    mats = [confusion_matrix(*_random_grades(s)[:2]) for s in range(5)]
    stacked = scalar_figures(np.stack(mats))
    for i, c in enumerate(mats):
        single = scalar_figures(c)
        for key, value in single.items():
            assert stacked[key][i] == pytest.approx(float(value), abs=1e-12, nan_ok=True)


def test_bootstrap_intervals_resample_queries_and_are_seeded() -> None:
    rng = np.random.default_rng(5)
    queries = rng.integers(0, 30, 900)
    human = rng.integers(0, 4, 900)
    llm = np.clip(human + rng.integers(-1, 2, 900), 0, 3)
    per_query = grouped_confusion(queries, 30, human, llm, 4)
    point = agreement(human, llm)
    first = agreement_intervals(per_query, 500, seed=1)
    assert first == agreement_intervals(per_query, 500, seed=1)
    assert first != agreement_intervals(per_query, 500, seed=2)
    for key in ("cohen_kappa", "weighted_kappa_quadratic", "mean_bias", "exact_agreement"):
        lo, hi = first[key]
        assert lo is not None and hi is not None
        assert lo < point[key] < hi


@pytest.mark.skipif(not DATA.exists(), reason="TREC DL 2019 data absent")
@pytest.mark.parametrize(
    ("name", "kappa", "qwk"),
    [
        ("dl2019_test_4prompts_flant5large", 0.2272, 0.4477),
        ("dl2019_test_4prompts_llama70b", 0.1666, 0.4611),
        ("dl2019_test_baseline_relavance_qrel_prompt_order_3210", 0.1284, 0.3221),
        ("dl2019_sun_then_decomposed_relavance_qrel", 0.1688, 0.3759),
        ("dl2019_test_sun_then_decomposed_flant5large", 0.1867, 0.4416),
    ],
)
def test_trec_dl_2019_reference_kappas(name: str, kappa: float, qwk: float) -> None:
    def read(path: Path) -> dict[tuple[str, str], int]:
        out = {}
        for line in path.read_text().splitlines():
            qid, _, doc, grade = line.split()
            out[(qid, doc)] = int(grade)
        return out

    human = read(DATA / "2019qrels-pass.txt")
    llm = read(DATA / "llm-labels" / f"{name}.txt")
    keys = sorted(human.keys() & llm.keys())
    h = np.array([human[k] for k in keys])
    m = np.array([llm[k] for k in keys])
    out = agreement(h, m)
    assert out["n"] == 9260
    assert round(out["cohen_kappa"], 4) == kappa
    assert round(out["weighted_kappa_quadratic"], 4) == qwk
    lin = cohen_kappa_score(h, m, weights="linear", labels=[0, 1, 2, 3])
    assert out["weighted_kappa_linear"] == pytest.approx(lin, abs=1e-12)
    ordinal = krippendorff.alpha(np.vstack([h, m]), level_of_measurement="ordinal")
    assert out["krippendorff_alpha_ordinal"] == pytest.approx(ordinal, abs=1e-12)
