"""Coverage of the PPI++ intervals by simulation, for each sample design, at several sizes.

One fixed population of LLM-graded pairs in queries that differ in size and in how many relevant
pairs they hold, with a lenient LLM judge. The estimand is the share of relevant pairs among
these pairs (finite population), so each trial draws a new human sample from the same
population, as `relgrade sample` would, and asks whether the 95% interval holds the truth.
The draws are vectorised; the estimator is the library's, called once per trial.
"""

from __future__ import annotations

import numpy as np
import pytest

from calibration.spotcheck.sampling import plan_design, systematic_draw
from calibration.stats.ppi import ppi_mean
from tests.helpers.sampling import make_judgment
from tests.helpers.spotcheck_sim import synthetic_population

# Simulations of thousands of trials each: run by the whole suite, not the quick loop.
pytestmark = pytest.mark.slow

TRIALS = 2000


Q, Y, F, GRADE = synthetic_population()
TRUTH = float(Y.mean())


def _covered(est_ci: tuple[float, float]) -> bool:
    return bool(est_ci[0] <= TRUTH <= est_ci[1])


def _uniform_pairs(n: int, seed: int) -> tuple[float, float]:
    """Coverage and mean width with n pairs drawn uniformly without replacement."""
    rng = np.random.default_rng(seed)
    picks = np.argpartition(rng.random((TRIALS, Y.size)), n, axis=1)[:, :n]
    covered, widths = 0, []
    for pick in picks:
        s = np.zeros(Y.size, dtype=bool)
        s[pick] = True
        est = ppi_mean(Y[s], F[s], F[~s], bounds=(0.0, 1.0))
        covered += _covered(est.ppi_ci)
        widths.append(est.width)
    return covered / TRIALS, float(np.mean(widths))


@pytest.mark.parametrize("n", [300, 600, 1500])
def test_pairs_drawn_at_random_cover_95_percent(n: int) -> None:
    coverage, _ = _uniform_pairs(n, seed=n)
    assert 0.93 <= coverage <= 0.97, coverage


def test_grading_more_pairs_narrows_the_interval_as_one_over_root_n() -> None:
    # The old per-part clustered variance barely shrank; the pair design's does, and a bit
    # faster than 1/sqrt(n) because of the finite-population correction.
    _, w300 = _uniform_pairs(300, seed=1)
    _, w1200 = _uniform_pairs(1200, seed=2)
    fpc = np.sqrt((1 - 1200 / Y.size) / (1 - 300 / Y.size))
    assert w1200 / w300 == pytest.approx(0.5 * fpc, rel=0.05)


@pytest.mark.parametrize(
    ("strategy", "n"), [("stratified", 300), ("stratified", 800), ("low", 400)]
)
def test_weighted_pair_samples_cover_95_percent(strategy: str, n: int) -> None:
    judgments = [
        make_judgment(f"q{qq}", f"d{i}", int(g))
        for i, (qq, g) in enumerate(zip(Q, GRADE, strict=True))
    ]
    design = plan_design(judgments, strategy=strategy, size=n)
    keys = sorted(design.strata)
    stratum = np.array([keys.index(label) for label in design.labels])
    rng = np.random.default_rng(n)
    covered = 0
    for _ in range(TRIALS):
        order = np.concatenate(
            [rng.permutation(np.flatnonzero(stratum == k)) for k in range(len(keys))]
        )
        s = np.zeros(Y.size, dtype=bool)
        s[systematic_draw(design.pi, order, rng)] = True
        est = ppi_mean(Y[s], F[s], F[~s], weights=1.0 / design.pi[s], bounds=(0.0, 1.0))
        covered += _covered(est.ppi_ci)
    assert 0.93 <= covered / TRIALS <= 0.97, covered / TRIALS


def _whole_queries(m: int, seed: int) -> tuple[float, float]:
    """Coverage of the t and of the normal interval when m whole queries are graded."""
    rng = np.random.default_rng(seed)
    n_queries = int(Q.max()) + 1
    picks = np.argpartition(rng.random((TRIALS, n_queries)), m, axis=1)[:, :m]
    covered = {"t": 0, "normal": 0}
    for pick in picks:
        s = np.isin(Q, pick)
        for quantile in ("t", "normal"):
            est = ppi_mean(
                Y[s],
                F[s],
                F[~s],
                groups=Q[s],
                groups_unlabelled=Q[~s],
                bounds=(0.0, 1.0),
                quantile=quantile,
            )
            covered[quantile] += _covered(est.ppi_ci)
    return covered["t"] / TRIALS, covered["normal"] / TRIALS


def test_six_whole_queries_cover_at_least_90_percent_with_the_t_quantile() -> None:
    # Measured over 8,000 trials: 90.0% with the t quantile (the normal one: 84%). Six queries of
    # uneven size are the edge of what a t interval can promise; `caution` says so next to it.
    t_cov, normal_cov = _whole_queries(6, seed=6)
    assert t_cov >= 0.90, t_cov
    assert normal_cov < t_cov - 0.03  # the normal quantile is what under-covered


@pytest.mark.slow
@pytest.mark.parametrize("m", [12, 24])
def test_more_whole_queries_cover_close_to_95_percent(m: int) -> None:
    t_cov, _ = _whole_queries(m, seed=m)
    assert 0.92 <= t_cov <= 0.975, t_cov


def test_per_run_measure_over_six_whole_queries_covers_90_percent() -> None:
    # A per-query measure (nDCG-like, continuous) of one run over Q queries; the LLM's is biased
    # upwards. The labelled unit is a query; estimand: the mean over these Q queries.
    rng = np.random.default_rng(11)
    n_queries = 60
    human = rng.beta(2, 3, n_queries)
    llm = np.clip(human + 0.12 + rng.normal(0, 0.08, n_queries), 0, 1)
    truth = human.mean()
    picks = np.argpartition(rng.random((TRIALS, n_queries)), 6, axis=1)[:, :6]
    covered = 0
    for pick in picks:
        s = np.zeros(n_queries, dtype=bool)
        s[pick] = True
        est = ppi_mean(human[s], llm[s], llm[~s], bounds=(0.0, 1.0), quantile="t")
        covered += est.ppi_ci[0] <= truth <= est.ppi_ci[1]
        assert est.df == 5
    assert covered / TRIALS >= 0.90, covered / TRIALS
