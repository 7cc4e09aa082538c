"""Whole-queries samples with few queries: the relevant share unbiased, runs human-only below 10.

The share's estimator (cross-fitted lambda, jackknife over queries) is simulated on TREC DL 2019
(the five label sets as LLM, NIST grades as people; skipped without the data) and on a synthetic
population (tests/helpers/spotcheck_sim.py): m whole queries drawn at random, 1,000 trials.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from calibration.stats.ppi import ppi_mean
from calibration.stats.ppi_clusters import crossfit_cluster_share, isaki_factor, logit_interval
from calibration.summary import summarize
from tests.helpers.spotcheck_sim import DL2019, LABEL_SETS, load_label_sets, synthetic_population

TRIALS = 1000


def _simulate(
    q: np.ndarray, y: np.ndarray, f: np.ndarray, m: int, seed: int
) -> tuple[float, float, float]:
    """Bias and coverage of the cross-fitted estimator, and the bias of in-sample PPI++."""
    rng = np.random.default_rng(seed)
    n_queries = int(q.max()) + 1
    truth = float(y.mean())
    est, covered, old = [], 0, []
    for _ in range(TRIALS):
        s = np.isin(q, rng.choice(n_queries, m, replace=False))
        e, (lo, hi), _ = crossfit_cluster_share(y[s], f[s], q[s], f, q)
        est.append(e)
        covered += lo <= truth <= hi
        fitted = ppi_mean(y[s], f[s], f[~s], groups=q[s], groups_unlabelled=q[~s], quantile="t")
        old.append(fitted.ppi)
    return float(np.mean(est)) - truth, covered / TRIALS, float(np.mean(old)) - truth


def _populations() -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    q, y, f, _ = synthetic_population()
    pops = [("synthetic", q, y, f)]
    if DL2019 is not None:
        sets = load_label_sets()
        y = (sets.human >= 2).astype(np.float64)
        pops += [(n, sets.query, y, (sets.llm[n] >= 2).astype(np.float64)) for n in LABEL_SETS]
    return pops


@pytest.mark.slow
def test_six_whole_queries_give_an_unbiased_share_that_covers() -> None:
    # Coverage is pooled over the populations (6,000 draws, standard error 0.003); each one's
    # 1,000 draws may sit a standard error or so below the pooled figure.
    coverages = []
    for name, q, y, f in _populations():
        bias, coverage, old_bias = _simulate(q, y, f, 6, seed=6)
        assert abs(bias) <= 0.01, (name, bias)
        assert coverage >= 0.92, (name, coverage)
        coverages.append(coverage)
        if name != "synthetic":
            assert abs(bias) < abs(old_bias), (name, bias, old_bias)
    assert float(np.mean(coverages)) >= 0.93, coverages


def _frames(n_whole: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """LLM grades for 20 queries x 6 docs, people's for the first n_whole queries whole, a run."""
    rng = np.random.default_rng(n_whole)
    rows = [(f"q{q}", f"d{q}-{d}", int(rng.integers(0, 4))) for q in range(20) for d in range(6)]
    llm = pd.DataFrame(rows, columns=["query_id", "doc_id", "grade"])
    human = llm[llm["query_id"].isin([f"q{q}" for q in range(n_whole)])].copy()
    human["grade"] = np.clip(human["grade"] + rng.integers(-1, 2, len(human)), 0, 3)
    run = llm[["query_id", "doc_id"]].assign(score=rng.random(len(llm)), rank=0)
    run["rank"] = run.groupby("query_id")["score"].rank(ascending=False).astype(int)
    return llm, human, run


@pytest.mark.parametrize(("n_whole", "human_only"), [(6, True), (12, False)])
def test_per_run_estimates_are_human_only_below_ten_whole_queries(
    n_whole: int, human_only: bool
) -> None:
    llm, human, run = _frames(n_whole)
    summary = summarize(llm, human, runs={"r": run}, n_bootstrap=0)
    assert summary.estimates is not None and summary.estimates.runs is not None
    est = summary.estimates.runs["r"]
    assert (est.ppi == est.human_only) is human_only
    assert ("human-only" in (est.interval or "")) is human_only
    assert est.ppi_ci is not None and None not in est.ppi_ci


def test_isaki_factor_scales_up_only_when_drawn_queries_are_more_alike() -> None:
    n_pop, f_pop = np.array([10.0, 10.0, 10.0, 10.0]), np.array([1.0, 9.0, 2.0, 8.0])
    alike = isaki_factor(f_pop[[0, 2]], n_pop[[0, 2]], f_pop, n_pop)
    spread = np.var(f_pop - 0.5 * n_pop, ddof=1) / np.var(f_pop[[0, 2]] - 5.0, ddof=1)
    assert alike == pytest.approx(spread) and alike > 1
    assert isaki_factor(f_pop[[0, 1]], n_pop[[0, 1]], f_pop, n_pop) == 1.0
    assert isaki_factor(f_pop[[0, 0]], n_pop[[0, 0]], f_pop, n_pop) == np.inf


def test_logit_interval_is_the_delta_method_mapped_back() -> None:
    lo, hi = logit_interval(0.2, 0.01, 2.0)
    half = 2.0 * 0.1 / (0.2 * 0.8)
    assert lo == pytest.approx(1 / (1 + np.exp(-(np.log(0.25) - half))))
    assert hi == pytest.approx(1 / (1 + np.exp(-(np.log(0.25) + half))))
    assert hi - 0.2 > 0.2 - lo  # leans away from 0
    assert logit_interval(0.0, 0.01, 2.0) == (0.0, 0.2)
    assert logit_interval(0.3, np.inf, 2.0) == (0.0, 1.0)
