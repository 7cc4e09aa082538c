"""An interval for a filled score that carries the LLM's disagreement with people.

Method: a PPI-style correction on the filled pairs, to first order. The pairs graded by both
people and the LLM (`grade --also-judged`, a random draw from the judged pool with inclusion
probabilities pi) tell what the LLM's grade does to a score. For each such pair i and each run,
d_i = the run's mean score with people's grade of i minus the same with the LLM's grade of i
(every other pair as in the filled qrels). The holes were graded by the LLM only; if they
resemble the judged pool (the assumption: true when holes are a random share of the pool, as
in DL 2019 with judgments removed at random, doubtful for a new system's harder holes), the
score under people's grades of the H holes is about

    filled + H * mean_w(d),      mean_w the 1/pi-weighted (Hajek) mean over the overlap,

with variance H^2 var(d) / n_eff (estimating the mean from the overlap) + H var(d) (which H
pairs are holes), n_eff = (sum w)^2 / sum w^2; the interval is normal at `level`. Exact in
expectation for measures that add up over pairs (P@k, DCG-like sums); for nDCG, RR and AP a
first-order (linearised) correction: their ideal and first-hit terms make joint changes of many
holes differ from the sum of single changes (docs/filling-holes.md gives the coverage measured).

A pair changes its own query's score only, so the d_i of pairs of different queries come from
one rescoring: one rescoring per round, a round taking at most one overlap pair per query.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from grader.metrics.evaluate import Missing, score
from grader.metrics.judged_rows import Ranked, ideal_of
from grader.metrics.measures import SUMMED, Measure

Int = npt.NDArray[np.int64]
Float = npt.NDArray[np.float64]

METHOD = "PPI-style first-order correction from the also-judged pairs (normal interval)"


@dataclass(frozen=True)
class Interval:
    """The `level` interval of a filled mean score, centred on the corrected `estimate`."""

    estimate: float
    low: float
    high: float
    level: float
    pairs: int
    method: str = METHOD


def rescored(ranked: Ranked, grades: Int) -> Ranked:
    """A coded `Ranked` (grade = the pair's index in `grades`) with the pairs' grades put in."""
    ideal = ideal_of(ranked.ideal_query, grades[ranked.ideal_grade])
    return dataclasses.replace(
        ranked,
        grade=grades[ranked.grade],
        ideal_query=ideal.query,
        ideal_grade=ideal.grade,
        ideal_pos=ideal.pos,
    )


def _rounds(query_of: Int) -> Int:
    """Round of each pair: its position among the pairs of its query (0, 1, ...)."""
    order = np.argsort(query_of, kind="stable")
    ranked_q = query_of[order]
    out = np.empty(len(order), dtype=np.int64)
    out[order] = np.arange(len(order)) - np.searchsorted(ranked_q, ranked_q)
    return out


def pair_effects(
    ranked: Ranked,
    measures: Sequence[Measure],
    grades: Int,
    pairs: Int,
    llm: Int,
    *,
    missing: Missing = "zero",
) -> tuple[Float, Float]:
    """(the run's mean scores, d: one row per overlap pair, one column per measure): the change
    of each mean when the pair's grade goes from the LLM's (`llm`) to people's (in `grades`)."""
    base = score(rescored(ranked, grades), measures, missing=missing)
    means = np.array([value for _, value in base.means()], dtype=np.float64)
    column = {q: i for i, q in enumerate(base.query_ids)}
    query_code = np.full(len(grades), -1, dtype=np.int64)
    query_code[ranked.ideal_grade] = ranked.ideal_query  # the coded ideal lists every pair
    codes = query_code[pairs]
    col = np.array([column.get(ranked.query_ids[c], -1) for c in codes.tolist()], dtype=np.int64)
    effects = np.zeros((len(pairs), len(measures)), dtype=np.float64)
    rounds = _rounds(codes)
    for r in range(int(rounds.max()) + 1 if len(rounds) else 0):
        chosen = np.flatnonzero((rounds == r) & (col >= 0))
        if not len(chosen):
            continue
        swapped = grades.copy()
        swapped[pairs[chosen]] = llm[chosen]
        other = score(rescored(ranked, swapped), measures, missing=missing)
        cols = col[chosen]
        effects[chosen] = (base.values[:, cols] - other.values[:, cols]).T
    divisor = np.array(
        [1.0 if m.name in SUMMED else max(base.n_queries, 1) for m in measures], dtype=np.float64
    )
    return means, effects / divisor


def corrected_interval(
    coded: Mapping[str, Ranked],
    measures: Sequence[Measure],
    grades: Int,
    pairs: Int,
    llm: Int,
    weights: Float,
    holes: int,
    *,
    missing: Missing = "zero",
    level: float = 0.95,
) -> tuple[dict[str, dict[str, Interval]], str]:
    """Per run and measure, the corrected filled score and its interval (module docstring).

    `coded` holds each run joined with the merged qrels coded by pair index into `grades`
    (people's grades, the LLM's on the holes); `pairs` are the overlap pairs' indices, `llm`
    their LLM grades (as merged), `weights` their 1/pi; `holes` the number of filled pairs.
    """
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    w = weights / weights.sum()
    n_eff = float(weights.sum() ** 2 / (weights**2).sum())
    n = len(pairs)
    out: dict[str, dict[str, Interval]] = {}
    for run, ranked in coded.items():
        means, d = pair_effects(ranked, measures, grades, pairs, llm, missing=missing)
        mean_d = (w[:, None] * d).sum(axis=0)
        var_d = (w[:, None] * (d - mean_d) ** 2).sum(axis=0) * n / max(n - 1, 1)
        se = np.sqrt(holes**2 * var_d / n_eff + holes * var_d)
        estimate = means + holes * mean_d
        out[run] = {
            str(m): Interval(float(e), float(e - z * s), float(e + z * s), level, n)
            for m, e, s in zip(measures, estimate.tolist(), se.tolist(), strict=True)
        }
    note = (
        f"{level:.0%} interval of the filled score: {METHOD}, from {n} pairs graded by both "
        f"people and the LLM, {holes} holes; centred on the corrected score"
    )
    return out, note
