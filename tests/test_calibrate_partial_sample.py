"""A sample graded in part, and `estimates.mean_grade`: a uniform sample's graded prefix is a
uniform sample with pi = n / N; part of another design gets no interval, and says why; the mean
grade's design-based interval and the pool's mean bias. The coverage by simulation:
bench/calibrate_coverage.py (a seeded small version here, marked slow)."""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest
from ppi_py import ppi_mean_pointestimate

from calibration.estimates_section import mean_grade, relevant_share
from calibration.join import PairedGrades
from calibration.spotcheck.sequential import uniform_draw_probabilities
from calibration.spotcheck.stopping import DrawOrder
from calibration.stats.ppi import SampleDesign, ppi_mean
from tests.helpers.spotcheck_sim import synthetic_population

Z = NormalDist().inv_cdf(0.975)


def _bounds(ci: list[float | None] | None) -> tuple[float, float]:
    assert ci is not None and ci[0] is not None and ci[1] is not None
    return ci[0], ci[1]


def _world(seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    """The synthetic population with people's 0..3 grades: (frame query_id, doc_id, human,
    llm), and the truth's relevance 0/1."""
    q, y, _, grade = synthetic_population()
    rng = np.random.default_rng(seed)
    human = np.where(y == 1, 2 + (rng.random(y.size) < 0.3), rng.random(y.size) < 0.4)
    frame = pd.DataFrame(
        {
            "query_id": [f"q{i}" for i in q],
            "doc_id": [f"d{i}" for i in range(q.size)],
            "human": human.astype(np.int64),
            "llm": grade,
        }
    )
    return frame, y


def _paired(frame: pd.DataFrame, graded: np.ndarray) -> PairedGrades:
    llm = frame[["query_id", "doc_id", "llm"]].rename(columns={"llm": "grade"})
    both = frame.iloc[graded].reset_index(drop=True)
    return PairedGrades(both, llm, llm, len(frame) - len(graded), 0)


def _order(frame: pd.DataFrame, sample: np.ndarray) -> DrawOrder:
    pairs = list(zip(frame["query_id"].iloc[sample], frame["doc_id"].iloc[sample], strict=True))
    return DrawOrder(pairs, uniform_draw_probabilities(len(sample), len(frame)), len(frame))


def test_the_graded_prefix_of_a_uniform_sample_has_pi_n_over_n() -> None:
    frame, _ = _world()
    n_pop, big, n = len(frame), 800, 120
    sample = np.random.default_rng(1).permutation(n_pop)[:big]
    paired = _paired(frame, sample[:n])
    design = SampleDesign("pairs", "manifest", "uniform", big)
    est = relevant_share(paired, design, np.full(n, n_pop / big), 2, order=_order(frame, sample))
    assert est.n_labelled == n
    # the textbook interval of a uniform sample of n from N: (1 - n/N) s_e^2 / n, e = y - lam f
    y = (paired.frame["human"] >= 2).to_numpy(float)
    f = (paired.frame["llm"] >= 2).to_numpy(float)
    assert est.lam is not None and est.ppi is not None and est.ppi_ci is not None
    e = y - est.lam * f
    half = Z * np.sqrt((1 - n / n_pop) * np.var(e, ddof=1) / n)
    assert est.ppi_ci == pytest.approx([est.ppi - half, est.ppi + half])
    assert est.caution is not None and "first 120 pairs" in est.caution
    # the manifest's pi (800 / N) gave a shorter interval
    old = ppi_mean(
        y,
        f,
        (frame["llm"] >= 2).to_numpy(float)[np.setdiff1d(range(n_pop), sample[:n])],
        weights=np.full(n, n_pop / big),
    )
    low, high = _bounds(est.ppi_ci)
    assert old.width < high - low


def test_grades_after_a_gap_wait_for_it() -> None:
    frame, _ = _world()
    n_pop, big = len(frame), 800
    sample = np.random.default_rng(2).permutation(n_pop)[:big]
    graded = np.concatenate([sample[:50], sample[51:90]])  # pair 51 skipped
    paired = _paired(frame, graded)
    design = SampleDesign("pairs", "manifest", "uniform", big)
    est = relevant_share(
        paired, design, np.full(len(graded), n_pop / big), 2, order=_order(frame, sample)
    )
    assert est.n_labelled == 50


def test_part_of_a_stratified_sample_gets_no_interval_and_says_why() -> None:
    frame, _ = _world()
    n_pop = len(frame)
    graded = np.random.default_rng(3).permutation(n_pop)[:100]
    paired = _paired(frame, graded)
    design = SampleDesign("pairs", "manifest", "stratified", 300)
    w = np.full(100, n_pop / 300)
    for est in (relevant_share(paired, design, w, 2), mean_grade(paired, design, w)):
        assert est.ppi_ci is None
        assert est.caution is not None and "no interval is given" in est.caution
    assert mean_grade(paired, design, w).mean_bias_ci is None


def test_mean_grade_is_ppi_on_grades_and_gives_the_pool_bias() -> None:
    frame, _ = _world()
    n_pop, n = len(frame), 300
    graded = np.random.default_rng(4).permutation(n_pop)[:n]
    paired = _paired(frame, graded)
    design = SampleDesign("pairs", "manifest", "uniform", n)
    est = mean_grade(paired, design, np.full(n, n_pop / n))
    y = paired.frame["human"].to_numpy(float)
    f = paired.frame["llm"].to_numpy(float)
    rest = np.setdiff1d(np.arange(n_pop), graded)
    f_rest = frame["llm"].to_numpy(float)[rest]
    assert est.lam is not None and est.ppi is not None and est.ppi_ci is not None
    # ppi_py's point estimate with its lambda (ours times N_u / N: module docstring of ppi.py)
    ref = ppi_mean_pointestimate(y, f, f_rest, lam=est.lam * len(rest) / n_pop)
    assert est.ppi == pytest.approx(float(np.ravel(ref)[0]))
    llm_mean = frame["llm"].mean()
    assert est.llm_only == pytest.approx(llm_mean)
    assert est.mean_bias == pytest.approx(llm_mean - est.ppi)
    low, high = _bounds(est.ppi_ci)
    assert est.mean_bias_ci == pytest.approx([llm_mean - high, llm_mean - low])
    assert "mean human grade" in est.estimand


def test_a_census_has_no_uncertainty() -> None:
    frame, _ = _world()
    everything = np.arange(len(frame))
    paired = _paired(frame, everything[:-1])  # all but one pair
    design = SampleDesign("pairs", "inferred")
    est = mean_grade(paired, design, None)
    assert est.ppi_ci is not None and est.ppi is not None
    assert abs(est.ppi - frame["human"].mean()) < 3 / len(frame)


@pytest.mark.slow
def test_partial_uniform_interval_covers_by_simulation() -> None:
    """The first 100 of a 700-pair uniform sample of 1,500 pairs, 200 seeded worlds: the prefix
    interval covers the share and the mean grade near 95%; the manifest's pi covered less."""
    whole, _ = _world()
    frame = whole.iloc[:1500].reset_index(drop=True)
    n_pop, big, n = len(frame), 700, 100
    truth, mean_truth = float((frame["human"] >= 2).mean()), float(frame["human"].mean())
    design = SampleDesign("pairs", "manifest", "uniform", big)
    rng = np.random.default_rng(0)
    hits, grade_hits, old_hits = [], [], []
    f_all = (frame["llm"] >= 2).to_numpy(float)
    for _ in range(200):
        sample = rng.permutation(n_pop)[:big]
        paired = _paired(frame, sample[:n])
        w = np.full(n, n_pop / big)
        est = relevant_share(paired, design, w, 2, order=_order(frame, sample))
        assert est.ppi_ci is not None
        low, high = _bounds(est.ppi_ci)
        hits.append(low <= truth <= high)
        grade = mean_grade(paired, design, w, order=_order(frame, sample))
        assert grade.ppi_ci is not None
        low, high = _bounds(grade.ppi_ci)
        grade_hits.append(low <= mean_truth <= high)
        rest = np.ones(n_pop, dtype=bool)
        rest[sample[:n]] = False
        yy = (paired.frame["human"] >= 2).to_numpy(float)
        old = ppi_mean(yy, f_all[sample[:n]], f_all[rest], weights=w)
        old_hits.append(old.ppi_ci[0] <= truth <= old.ppi_ci[1])
    assert 0.92 <= np.mean(hits) <= 0.98
    assert 0.92 <= np.mean(grade_hits) <= 0.98
    assert np.mean(old_hits) < np.mean(hits)


def test_no_interval_until_the_first_pairs_of_the_order_are_graded() -> None:
    frame, _ = _world()
    n_pop, big = len(frame), 800
    sample = np.random.default_rng(5).permutation(n_pop)[:big]
    paired = _paired(frame, sample[1:60])  # the first pair of the order is not graded
    design = SampleDesign("pairs", "manifest", "uniform", big)
    est = relevant_share(paired, design, np.full(59, n_pop / big), 2, order=_order(frame, sample))
    assert est.ppi_ci is None
    assert est.caution is not None and "first 2 pairs of the order" in est.caution


def test_part_of_a_uniform_sample_without_its_order_gets_no_interval() -> None:
    frame, _ = _world()
    graded = np.random.default_rng(6).permutation(len(frame))[:80]
    design = SampleDesign("pairs", "manifest", "uniform", 400)
    est = relevant_share(_paired(frame, graded), design, np.full(80, len(frame) / 400), 2)
    assert est.ppi_ci is None
    assert est.caution is not None and "does not record the draw order" in est.caution
