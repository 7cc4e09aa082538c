"""PPI++ estimates: interval coverage by simulation, the tuned lambda, weighted variant."""

from __future__ import annotations

import numpy as np
import pytest

from calibration.stats.ppi import ppi_mean


def _draw(rng: np.random.Generator, k: int, accuracy: float) -> tuple[np.ndarray, np.ndarray]:
    y = (rng.random(k) < 0.3).astype(float)
    noise = (rng.random(k) < 0.5).astype(float)
    f = np.where(rng.random(k) < accuracy, y, noise)
    return y, f


def test_interval_coverage_is_close_to_95_percent() -> None:
    rng = np.random.default_rng(2023)
    covered_ppi = covered_human = 0
    widths_ppi, widths_human = [], []
    trials = 500
    for _ in range(trials):
        y, f = _draw(rng, 200, accuracy=0.8)
        _, f_unlabelled = _draw(rng, 2000, accuracy=0.8)
        est = ppi_mean(y, f, f_unlabelled, population="infinite")
        covered_ppi += est.ppi_ci[0] <= 0.3 <= est.ppi_ci[1]
        covered_human += est.human_ci[0] <= 0.3 <= est.human_ci[1]
        widths_ppi.append(est.ppi_ci[1] - est.ppi_ci[0])
        widths_human.append(est.human_ci[1] - est.human_ci[0])
    assert 0.92 <= covered_ppi / trials <= 0.98
    assert 0.92 <= covered_human / trials <= 0.98
    # a good LLM makes the interval clearly narrower than the human-only one
    assert np.mean(widths_ppi) < 0.8 * np.mean(widths_human)


def test_continuous_per_query_measure_coverage() -> None:
    # per-query measures (e.g. nDCG) are continuous and the LLM's are biased upwards
    rng = np.random.default_rng(7)
    covered = 0
    trials = 500
    for _ in range(trials):
        y = rng.beta(2, 3, 60)
        f = np.clip(y + 0.15 + rng.normal(0, 0.1, 60), 0, 1)
        yu = rng.beta(2, 3, 400)
        fu = np.clip(yu + 0.15 + rng.normal(0, 0.1, 400), 0, 1)
        est = ppi_mean(y, f, fu, population="infinite")
        covered += est.ppi_ci[0] <= 0.4 <= est.ppi_ci[1]
        assert est.llm_only > 0.45  # the LLM-only estimate carries the judge's bias
    assert 0.92 <= covered / trials <= 0.98


def test_useless_llm_falls_back_to_the_human_mean() -> None:
    rng = np.random.default_rng(1)
    y = (rng.random(300) < 0.4).astype(float)
    f = (rng.random(300) < 0.5).astype(float)  # independent of y
    fu = (rng.random(3000) < 0.5).astype(float)
    est = ppi_mean(y, f, fu)
    assert est.lam < 0.2
    human_width = est.human_ci[1] - est.human_ci[0]
    assert est.ppi_ci[1] - est.ppi_ci[0] <= human_width * 1.05


def test_perfect_llm_gives_lambda_near_one_and_a_tight_interval() -> None:
    rng = np.random.default_rng(3)
    y = (rng.random(100) < 0.3).astype(float)
    fu = (rng.random(10000) < 0.3).astype(float)
    est = ppi_mean(y, y, fu, population="infinite")
    assert est.lam > 0.9
    assert est.ppi == pytest.approx(est.lam * fu.mean() + (1 - est.lam) * y.mean())
    assert est.ppi_ci[1] - est.ppi_ci[0] < 0.5 * (est.human_ci[1] - est.human_ci[0])


def test_fixed_lambda_zero_is_the_classical_estimate() -> None:
    y = np.array([1.0, 0.0, 1.0, 1.0])
    est = ppi_mean(y, [0.0, 0.0, 0.0, 0.0], [1.0, 1.0], lam=0.0)
    assert est.ppi == pytest.approx(0.75)
    assert est.ppi_ci == pytest.approx(est.human_ci)


def test_weighted_estimator_undoes_unequal_sampling() -> None:
    # relevant pairs are sampled 4x as often; weights 1/pi must remove that bias
    rng = np.random.default_rng(11)
    trials, covered, errs_w, errs_u = 300, 0, [], []
    for _ in range(trials):
        y_pop = (rng.random(5000) < 0.2).astype(float)
        f_pop = np.where(rng.random(5000) < 0.7, y_pop, (rng.random(5000) < 0.3).astype(float))
        pi = np.where(f_pop == 1, 0.08, 0.02)
        picked = rng.random(5000) < pi
        truth = y_pop.mean()
        est = ppi_mean(y_pop[picked], f_pop[picked], f_pop[~picked], weights=1 / pi[picked])
        plain = ppi_mean(y_pop[picked], f_pop[picked], f_pop[~picked])
        covered += est.ppi_ci[0] <= truth <= est.ppi_ci[1]
        errs_w.append(est.ppi - truth)
        errs_u.append(plain.human_only - truth)
    assert est.weighted is True
    assert abs(np.mean(errs_w)) < 0.01
    assert np.mean(errs_u) > 0.05  # the unweighted human mean is badly biased
    assert 0.90 <= covered / trials <= 0.99


def test_json_shape_and_no_labelled_units() -> None:
    est = ppi_mean([1.0, 0.0], [1.0, 0.0], [1.0, 1.0, 0.0])
    data = est.to_json()
    assert set(data) >= {"llm_only", "human_only", "ppi", "ppi_ci"}
    assert len(data["ppi_ci"]) == 2
    with pytest.raises(ValueError, match="labelled"):
        ppi_mean([], [], [1.0])


def _clustered(rng: np.random.Generator, n_queries: int) -> tuple[np.ndarray, ...]:
    """Pairs in queries that differ in how many relevant results they have (shared effect)."""
    per_query = rng.integers(20, 60, n_queries)
    base = rng.beta(1.0, 2.5, n_queries)  # each query's share of relevant pairs
    q = np.repeat(np.arange(n_queries), per_query)
    y = (rng.random(q.size) < base[q]).astype(float)
    f = np.where(rng.random(q.size) < 0.75, y, (rng.random(q.size) < 0.5).astype(float))
    return q, y, f


@pytest.mark.slow
def test_query_clustered_intervals_cover_when_whole_queries_are_labelled() -> None:
    # people grade whole queries: pairs of one query are not independent draws
    rng = np.random.default_rng(99)
    truth = 1.0 / 3.5  # mean of Beta(1, 2.5)
    trials, covered, covered_naive = 500, 0, 0
    for _ in range(trials):
        q, y, f = _clustered(rng, 120)
        labelled = q < 40
        est = ppi_mean(
            y[labelled],
            f[labelled],
            f[~labelled],
            groups=q[labelled],
            groups_unlabelled=q[~labelled],
            population="infinite",
        )
        naive = ppi_mean(y[labelled], f[labelled], f[~labelled], population="infinite")
        covered += est.ppi_ci[0] <= truth <= est.ppi_ci[1]
        covered_naive += naive.ppi_ci[0] <= truth <= naive.ppi_ci[1]
    assert est.clusters == 40
    assert 0.92 <= covered / trials <= 0.98
    assert covered_naive / trials < 0.8  # treating pairs as independent is overconfident


def test_intervals_stay_inside_the_estimands_range() -> None:
    # Three labelled queries near 1.0 with a wide spread: the raw CLT interval passes 1.
    y = np.array([1.0, 0.98, 0.4])
    f = np.array([0.9, 1.0, 0.5])
    fu = np.array([0.95, 0.99, 0.97, 0.6])
    raw = ppi_mean(y, f, fu)
    assert raw.human_ci[1] > 1.0
    clipped = ppi_mean(y, f, fu, bounds=(0.0, 1.0))
    assert clipped.ppi == raw.ppi and clipped.human_only == raw.human_only  # estimates untouched
    assert clipped.human_ci == (raw.human_ci[0], 1.0)
    assert 0.0 <= clipped.ppi_ci[0] <= clipped.ppi_ci[1] <= 1.0
