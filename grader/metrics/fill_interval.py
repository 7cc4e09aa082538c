"""An interval for a filled score that carries the LLM's disagreement with people.

Method: multiple imputation of the holes from the also-judged pairs, with a Bayesian bootstrap
over those pairs. The pairs graded by both people and the LLM (`grade --also-judged`) say, for
each LLM grade l, how people grade such pairs: P(human = h | LLM = l), weighted by 1/pi when
the draw was stratified. Each of `draws` rounds

1. reweights the overlap pairs by independent Exp(1) draws times 1/pi (a Bayesian bootstrap:
   the uncertainty of P(h | l) estimated from a few hundred pairs),
2. draws a human grade for every hole from P(h | its LLM grade) of that round,
3. scores every run with those grades in place of the LLM's (people's grades stay).

The interval is the central `level` range of the rounds' mean scores: where each run's score
under people's grades of the holes would fall, if people graded the holes as they graded the
overlap. It assumes the holes resemble the overlap given the LLM grade (true when the holes
are a random share of the judged pool; a new system's holes may be harder). Holes whose LLM
grade never occurs in the overlap keep the LLM's grade (said in the note).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from grader.metrics.evaluate import Missing, score
from grader.metrics.judged_rows import Ranked, ideal_of
from grader.metrics.measures import Measure

Int = npt.NDArray[np.int64]
Float = npt.NDArray[np.float64]

METHOD = "imputation from the also-judged pairs (Bayesian bootstrap over them)"


@dataclass(frozen=True)
class Interval:
    """The `level` interval of a filled mean score, from `draws` imputations."""

    low: float
    high: float
    level: float
    draws: int
    method: str = METHOD


def _draw_holes(
    rng: np.random.Generator,
    hole_llm: Int,
    fallback: Int,
    human: Int,
    llm: Int,
    weights: Float,
) -> Int:
    """Human grades for the holes from the reweighted overlap; unmatched LLM grades keep
    `fallback`."""
    boot = weights * rng.exponential(size=len(weights))
    out = fallback.copy()
    for grade in np.unique(hole_llm).tolist():
        where = np.flatnonzero(hole_llm == grade)
        mask = llm == grade
        total = boot[mask].sum()
        if not mask.any() or total <= 0:
            continue
        cats, inverse = np.unique(human[mask], return_inverse=True)
        probs = np.bincount(inverse, weights=boot[mask], minlength=len(cats)) / total
        out[where] = rng.choice(cats, size=len(where), p=probs)
    return out


def _rescored(ranked: Ranked, grades: Int) -> Ranked:
    """A coded `Ranked` (grade = pair index) with the pairs' grades put in."""
    ideal = ideal_of(ranked.ideal_query, grades[ranked.ideal_grade])
    return dataclasses.replace(
        ranked,
        grade=grades[ranked.grade],
        ideal_query=ideal.query,
        ideal_grade=ideal.grade,
        ideal_pos=ideal.pos,
    )


def imputed_interval(
    coded: Mapping[str, Ranked],
    measures: Sequence[Measure],
    grades: Int,
    n_human: int,
    hole_llm: Int,
    human: Int,
    llm: Int,
    weights: Float,
    *,
    missing: Missing = "zero",
    draws: int = 400,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[dict[str, dict[str, Interval]], str]:
    """Per run and measure, the interval of the filled mean (see the module docstring).

    `coded` holds each run joined with the merged qrels whose grade is the pair's index in
    `grades` (people's pairs first, `n_human` of them, then the holes with LLM grades
    `hole_llm`); `human`, `llm`, `weights` describe the overlap pairs.
    """
    rng = np.random.default_rng(seed)
    fallback = grades[n_human:].copy()
    names = [str(m) for m in measures]
    means = {run: np.empty((draws, len(measures))) for run in coded}
    for b in range(draws):
        drawn = grades.copy()
        drawn[n_human:] = _draw_holes(rng, hole_llm, fallback, human, llm, weights)
        for run, ranked in coded.items():
            scores = score(_rescored(ranked, drawn), measures, missing=missing)
            means[run][b] = [value for _, value in scores.means()]
    tail = (1.0 - level) / 2.0
    out: dict[str, dict[str, Interval]] = {}
    for run, values in means.items():
        low = np.quantile(values, tail, axis=0)
        high = np.quantile(values, 1.0 - tail, axis=0)
        out[run] = {
            name: Interval(float(lo), float(hi), level, draws)
            for name, lo, hi in zip(names, low.tolist(), high.tolist(), strict=True)
        }
    unmatched = sorted(set(hole_llm.tolist()) - set(llm.tolist()))
    note = f"{level:.0%} interval of the filled score: {METHOD}, {draws} draws, {len(llm)} pairs"
    if unmatched:
        shown = ", ".join(str(g) for g in unmatched)
        count = int(np.isin(hole_llm, unmatched).sum())
        note += (
            f"; {count} holes with LLM grade {shown}, which no also-judged pair has, keep the "
            "LLM's grade (the interval leaves their disagreement out)"
        )
    return out, note
