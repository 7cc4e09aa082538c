"""The relevant share's confidence sequence, by simulation on TREC DL 2019 (skipped without it).

People: the 9,260 NIST grades. LLM: each of the five shared label sets in turn. Each path is a
sample drawn one pair at a time as `relgrade sample` draws it (uniform, or active from the label
set's qrels, where only the grade's distance to the threshold tells the uncertainty), graded one
pair at a time up to n = 1,000; the sequence must hold the true share at every n on at least
95% of paths. The widths are compared with the fixed-n PPI++ interval of the library (`ppi_mean`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from calibration.spotcheck.sampling import plan_design
from calibration.stats.confseq import boundary, desraj_terms, running, share_sequence
from calibration.stats.ppi import ppi_mean
from grader.models import Judgment
from tests.helpers.spotcheck_sim import (
    DL2019,
    LABEL_SETS,
    LabelSets,
    distribution_of,
    load_label_sets,
    logprob_judge,
    successive_paths,
)

pytestmark = pytest.mark.skipif(DL2019 is None, reason="TREC DL 2019 data is not present")
PATHS, STEPS = 500, 1000


@pytest.fixture(scope="module")
def sets() -> LabelSets:
    return load_label_sets()


def _judgments(sets: LabelSets, grades: np.ndarray, **extra: list[Any]) -> list[Judgment]:
    return [
        Judgment(
            query_id=q,
            doc_id=d,
            grade=int(g),
            status="ok",
            judge="sim",
            key=f"{q} {d}",
            **{k: v[i] for k, v in extra.items()},
        )
        for i, (q, d, g) in enumerate(zip(sets.query_ids, sets.doc_ids, grades, strict=True))
    ]


def _weights(sets: LabelSets, design: str, name: str = LABEL_SETS[2]) -> np.ndarray:
    """The draw weights `relgrade sample` gives each pair: uniform (all 1), active from the
    label set's grades alone, or active from the five label sets as an ensemble."""
    if design == "uniform":
        return np.ones(sets.human.size)
    members: dict[str, list[Any]] = {}
    if design == "ensemble":
        members["judges"] = [
            {other: int(sets.llm[other][i]) for other in LABEL_SETS} for i in range(sets.human.size)
        ]
    plan = plan_design(_judgments(sets, sets.llm[name], **members), strategy="active", size=STEPS)
    assert plan.weights is not None
    return plan.weights


def _factor(w: np.ndarray) -> float:
    return float(np.mean(w) * np.mean(1 / w))


def _sequences(
    y: np.ndarray, f: np.ndarray, order: np.ndarray, p: np.ndarray, factor: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Running estimate and standard deviation of every path (rows), one column per grade."""
    return running(desraj_terms(y[order], f[order], p, float(f.sum()), y.size), factor)


def _fixed_ppi_half_width(y: np.ndarray, f: np.ndarray, n: int, seed: int) -> float:
    """Mean half-width of the fixed-n PPI++ interval over 100 uniform samples of n pairs."""
    rng = np.random.default_rng(seed)
    widths = []
    for _ in range(100):
        s = np.zeros(y.size, dtype=bool)
        s[rng.choice(y.size, n, replace=False)] = True
        widths.append(ppi_mean(y[s], f[s], f[~s]).width / 2)
    return float(np.mean(widths))


@pytest.mark.slow
@pytest.mark.parametrize("design", ["uniform", "active"])
def test_the_sequence_holds_the_truth_at_every_n_on_95_percent_of_paths(
    sets: LabelSets, design: str
) -> None:
    y = (sets.human >= 2).astype(np.float64)
    truth = float(y.mean())
    bound = boundary(np.arange(1, STEPS + 1))
    for name in LABEL_SETS:
        w = _weights(sets, design, name)
        order, p = successive_paths(w, STEPS, PATHS, np.random.default_rng(29))
        f = (sets.llm[name] >= 2).astype(np.float64)
        mean, sd = _sequences(y, f, order, p, _factor(w))
        ever_out = np.any(np.abs(mean - truth) > sd * bound, axis=1)
        assert ever_out.mean() <= 0.05, (name, design, ever_out.mean())
        assert abs(float(mean[:, -1].mean()) - truth) < 0.003  # unbiased at n = 1,000


@pytest.mark.slow
def test_at_300_grades_the_sequence_is_at_most_1_6_times_the_fixed_ppi_interval(
    sets: LabelSets,
) -> None:
    y = (sets.human >= 2).astype(np.float64)
    order, p = successive_paths(np.ones(y.size), 300, PATHS, np.random.default_rng(300))
    for name in LABEL_SETS:
        f = (sets.llm[name] >= 2).astype(np.float64)
        _, sd = _sequences(y, f, order, p)
        cs_half = float(np.mean(sd[:, -1]) * boundary(300))
        ratio = cs_half / _fixed_ppi_half_width(y, f, 300, seed=1)
        assert ratio <= 1.6, (name, ratio)


def _fixed_half_widths(
    y: np.ndarray, f: np.ndarray, order: np.ndarray, p: np.ndarray, factor: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per path: the fixed-n estimate and half-width of the sequential design (as `calibrate`
    reports an active sample's `ppi` and `ppi_ci`)."""
    seqs = [share_sequence(y[o], f[o], pp, f, factor) for o, pp in zip(order, p, strict=True)]
    est = np.array([s.fixed_estimate for s in seqs], dtype=np.float64)
    return est, np.array([(s.fixed_ci[1] - s.fixed_ci[0]) / 2 for s in seqs])


def _logprob_design(sets: LabelSets, r: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The LLM's prediction (P(relevant) r, as `calibrate` takes it from the grade distribution)
    and the active draw weights of a judge with P(relevant) r."""
    grades = np.where(r >= 0.5, 2, 1) + (r >= 0.75) - (r < 0.25)
    judged = _judgments(sets, grades, distribution=[distribution_of(x) for x in r])
    plan = plan_design(judged, strategy="active", size=n)
    assert plan.weights is not None and plan.uncertainty_source == "grade distribution"
    return r, plan.weights


def _active_against_uniform(
    sets: LabelSets, r: np.ndarray | None, seed: int
) -> tuple[float, float]:
    """Fixed-n half-widths at n = 300: active (the sequential design's fixed-n interval) and
    uniform PPI++, with the LLM's relevance from the grade distribution r (None: the ensemble
    of the five label sets)."""
    y = (sets.human >= 2).astype(np.float64)
    if r is None:
        f = (sets.llm[LABEL_SETS[2]] >= 2).astype(np.float64)
        w = _weights(sets, "ensemble")
    else:
        f, w = _logprob_design(sets, r, 300)
    order, p = successive_paths(w, 300, PATHS, np.random.default_rng(seed))
    _, half = _fixed_half_widths(y, f, order, p, _factor(w))
    return float(np.mean(half)), _fixed_ppi_half_width(y, f, 300, seed)


@pytest.mark.slow
@pytest.mark.parametrize(("sharpness", "most"), [(0.3, 0.92), (0.15, 0.85)])
def test_active_sampling_narrows_the_fixed_interval_with_a_logprob_judge(
    sets: LabelSets, sharpness: float, most: float
) -> None:
    # The shared label sets carry no logprobs: the judge's P(relevant) is simulated around the
    # NIST grades, calibrated by construction (tests/helpers/spotcheck_sim.logprob_judge), and
    # is the prediction of both designs. Measured: 0.90 of the uniform PPI++ half-width at
    # sharpness 0.3 (kappa 0.60 with NIST), 0.82 at 0.15 (kappa 0.74): the 15% target needs a
    # judge that sharp.
    r = logprob_judge(sets.human, np.random.default_rng(7), sharpness)
    active, uniform = _active_against_uniform(sets, r, seed=8)
    assert active <= most * uniform, active / uniform


@pytest.mark.slow
@pytest.mark.parametrize("sharpness", [0.3, 0.15])
def test_with_a_logprob_judge_the_sequence_and_the_fixed_interval_cover(
    sets: LabelSets, sharpness: float
) -> None:
    y = (sets.human >= 2).astype(np.float64)
    truth = float(y.mean())
    f, w = _logprob_design(sets, logprob_judge(sets.human, np.random.default_rng(7), sharpness), 1)
    order, p = successive_paths(w, STEPS, PATHS, np.random.default_rng(29))
    mean, sd = _sequences(y, f, order, p, _factor(w))
    ever_out = np.any(np.abs(mean - truth) > sd * boundary(np.arange(1, STEPS + 1)), axis=1)
    assert ever_out.mean() <= 0.05, ever_out.mean()
    est, half = _fixed_half_widths(y, f, order[:, :300], p[:, :300], _factor(w))
    assert np.mean(np.abs(est - truth) <= half) >= 0.93  # measured 93.8-96.6%
    assert abs(float(est.mean()) - truth) < 0.002  # fitted on the same grades: bias ~ 1/n


@pytest.mark.slow
def test_active_sampling_by_label_set_disagreement_costs_little(sets: LabelSets) -> None:
    # The five label sets' disagreement is a weak signal of their errors on DL 2019 (a judge
    # calibrated on it, cross-fitted by query, has an AUC of 0.78 against NIST; the best any
    # design could do with it is about 4% narrower). Measured: 1.02 times the uniform PPI++
    # half-width; the uniform half of each weight bounds the loss.
    active, uniform = _active_against_uniform(sets, None, seed=9)
    assert active <= 1.05 * uniform, active / uniform
