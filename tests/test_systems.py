"""System-ranking agreement: Kendall/Spearman against scipy, tau_AP by hand, swaps."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kendalltau, spearmanr

from calibration.stats.systems import compare_systems, kendall_tau, spearman_rho, tau_ap


@pytest.mark.parametrize("seed", range(10))
def test_rank_correlations_match_scipy_with_ties(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 6, 15).astype(float)
    y = x + rng.integers(-2, 3, 15)
    assert kendall_tau(x, y) == pytest.approx(kendalltau(x, y).statistic, abs=1e-12)
    assert spearman_rho(x, y) == pytest.approx(spearmanr(x, y).statistic, abs=1e-12)


def test_tau_ap_hand_computed() -> None:
    ref = [4.0, 3.0, 2.0, 1.0]
    assert tau_ap(ref, ref) == pytest.approx(1.0)
    assert tau_ap(ref, [1.0, 2.0, 3.0, 4.0]) == pytest.approx(-1.0)
    # Swapping the two best: positions 2..4 have C = 0, 2, 3 -> 2/3 * (0 + 1 + 1) - 1 = 1/3
    assert tau_ap(ref, [3.0, 4.0, 2.0, 1.0]) == pytest.approx(1 / 3)
    # Swapping the two worst: C = 1, 2, 2 -> 2/3 * (1 + 1 + 2/3) - 1 = 7/9
    assert tau_ap(ref, [4.0, 3.0, 1.0, 2.0]) == pytest.approx(7 / 9)
    # Kendall's tau cannot tell the two swaps apart; tau_AP punishes the one at the top
    assert kendall_tau(ref, [3.0, 4.0, 2.0, 1.0]) == kendall_tau(ref, [4.0, 3.0, 1.0, 2.0])


@pytest.mark.slow
def test_tau_ap_equals_kendall_on_average_over_random_orders() -> None:
    # Yilmaz et al.: with errors spread uniformly, E[tau_AP] = E[tau]; both are 0 in expectation
    rng = np.random.default_rng(0)
    ref = np.arange(8, 0, -1, dtype=float)
    values = [tau_ap(ref, rng.permutation(ref)) for _ in range(3000)]
    assert abs(float(np.mean(values))) < 0.03


def test_compare_systems_table_and_swaps() -> None:
    human = {"a": 0.50, "b": 0.40, "c": 0.30, "d": 0.20}
    llm = {"a": 0.60, "b": 0.45, "c": 0.62, "d": 0.10}
    out = compare_systems(human, llm)
    assert out["n_systems"] == 4
    assert [row["run"] for row in out["per_system"]] == ["a", "b", "c", "d"]
    c_row = out["per_system"][2]
    assert (c_row["human_rank"], c_row["llm_rank"], c_row["rank_change"]) == (3, 1, 2)
    assert out["largest_swaps"][0]["run"] == "c"
    assert out["kendall_tau"] == pytest.approx(kendalltau([5, 4, 3, 2], [60, 45, 62, 10]).statistic)
    assert out["tau_ap"] < out["kendall_tau"]


def test_too_few_systems_give_none() -> None:
    out = compare_systems({"a": 0.5}, {"a": 0.4})
    assert out["kendall_tau"] is None and out["tau_ap"] is None


@pytest.mark.slow
def test_rank_agreement_intervals_resample_queries() -> None:
    from calibration.stats.systems import rank_agreement_intervals

    rng = np.random.default_rng(4)
    quality = np.array([0.7, 0.6, 0.5, 0.4, 0.3])
    human = np.clip(quality + rng.normal(0, 0.2, (40, 5)), 0, 1)
    llm = np.clip(human + rng.normal(0, 0.15, (40, 5)), 0, 1)
    names = [f"r{i}" for i in range(5)]
    a = rank_agreement_intervals(human, llm, names, 400, seed=3)
    assert a == rank_agreement_intervals(human, llm, names, 400, seed=3)
    point = compare_systems(
        dict(zip(names, human.mean(axis=0), strict=True)),
        dict(zip(names, llm.mean(axis=0), strict=True)),
    )
    for key in ("kendall_tau", "spearman_rho", "tau_ap"):
        lo, hi = a[key]
        assert lo is not None and hi is not None
        assert -1.0 <= lo <= point[key] <= hi <= 1.0
    # with the same scores on both sides every resample agrees perfectly
    same = rank_agreement_intervals(human, human, names, 100, seed=0)
    assert same["kendall_tau"] == [1.0, 1.0]
