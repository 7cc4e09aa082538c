"""An interval for a filled score that carries the LLM's disagreement with people.

Method: a PPI-style correction on an imputed base. The pairs graded by both people and the LLM
(`grade --also-judged`, a random draw from the judged pool with inclusion probabilities pi)
play the part of PPI's labelled data.

1. Base: each hole gets a human grade drawn from P(human | LLM grade, query) (`_Imputer`:
   Bayes' rule, P(LLM | human) from the overlap and a per-query prior from people's grades).
   This puts the terms that depend on the qrels only (nDCG's ideal, recall's and AP's
   denominators) near their values under people's grades; it cannot know how a run ranks the
   truly relevant holes.
2. Correction: for each overlap pair i and each run, d_i = the run's mean score with people's
   grade of i minus the same with a predicted grade of i (drawn as in 1), changing the run's
   rows only. Holes resembling the judged pool, the score under people's grades of the H holes
   is about base + H * mean_w(d) (mean_w: the 1/pi-weighted Hajek mean), with variance
   H^2 var(d) / n_eff (the mean is estimated from n pairs; n_eff = (sum w)^2 / sum w^2) +
   H var(d) (which pairs are holes). Exact in expectation for what is linear in the run's
   grades given the ideal (P@k, DCG@k over a fixed ideal, R@k); first order for RR and AP.
3. Five imputations: each pair's d is averaged over them first, so the imputation noise it
   carries is counted once (Rubin's rules, within + (1 + 1/m) between, counted it twice: each
   imputation's within-variance already holds that imputation's draw); the variance is that
   of the averaged d plus B / m, B the between-imputation variance of the estimates (`combine`).
   Measures corrected to first order only, or whose qrels-only terms the holes move (AP, RR,
   recall: `first_order`), keep Rubin's rules and their slack. The interval is normal at
   `level`, centred on the corrected score; for a measure within 0..1 (`within_unit`) the
   score and both ends are held to 0..1.

The assumption: holes resemble the overlap given the LLM grade and the query (true when holes
are a random share of the judged pool, as in DL 2019 with judgments removed at random, or when
the overlap is a random sample of the holes themselves); `grader.evaluation.fill.reach` checks it
before an interval is given. docs/filling-holes.md gives the coverage measured.

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
from grader.metrics.measures import Measure, is_summed

Int = npt.NDArray[np.int64]
Float = npt.NDArray[np.float64]

METHOD = (
    "PPI-style correction from the pairs graded by both, on holes imputed from them "
    "(normal interval, 5 imputations, each pair's effect averaged over them)"
)


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
    start = rescored(ranked, grades)
    base = score(start, measures, missing=missing)
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
        # The run's rows change, the ideal lists (qrels-only terms) stay those of `grades`.
        other = score(
            dataclasses.replace(start, grade=swapped[ranked.grade]), measures, missing=missing
        )
        cols = col[chosen]
        effects[chosen] = (base.values[:, cols] - other.values[:, cols]).T
    divisor = np.array(
        [1.0 if is_summed(m) else max(base.n_queries, 1) for m in measures], dtype=np.float64
    )
    return means, effects / divisor


@dataclass(frozen=True)
class _Imputer:
    """Draws a human grade for pairs people did not grade, by Bayes' rule with a prior per query:
    P(h | l, q) is proportional to P(l | h) P_q(h). P(l | h), how the LLM grades pairs of human
    grade h, comes from the overlap (1/pi weighted); P_q(h) from people's grades of query q,
    shrunk towards the pool's share of h (`PRIOR_PAIRS` pseudo-pairs). The LLM's errors are
    assumed to depend on the true grade, not on the query; queries differ in how many relevant
    documents they have, which decides their ideal (IDCG, recall's denominator)."""

    grades: Int  # the human grades that occur, ascending
    likelihood: Float  # [grade, llm grade 0..9]: P(llm | human)
    prior: Float  # [query code, grade]: P_q(human)

    def draw(self, rng: np.random.Generator, query: Int, llm: Int, keep: Int) -> Int:
        known = (llm >= 0) & (llm < self.likelihood.shape[1])
        probs = np.zeros((len(llm), len(self.grades)))
        probs[known] = self.likelihood[:, llm[known]].T * self.prior[query[known]]
        total = probs.sum(axis=1)
        out = keep.copy()
        ok = np.flatnonzero(total > 0)
        cum = np.cumsum(probs[ok] / total[ok, None], axis=1)
        picks = (cum < rng.uniform(size=len(ok))[:, None]).sum(axis=1)
        out[ok] = self.grades[np.minimum(picks, len(self.grades) - 1)]
        return out


PRIOR_PAIRS = 5.0


def _imputer(
    human: Int,
    llm: Int,
    weights: Float,
    people: Int,
    people_query: Int,
    n_queries: int,
    holes_sample: bool = False,
) -> _Imputer:
    """The imputer from the overlap (`human`, `llm`, `weights`) and every human grade (`people`,
    with its query code); `holes_sample`: the overlap is a sample of the holes."""
    grades = np.unique(np.concatenate([human, people]))
    index = {g: i for i, g in enumerate(grades.tolist())}
    likelihood = np.zeros((len(grades), 10))
    for h, g, w in zip(human.tolist(), llm.tolist(), weights.tolist(), strict=True):
        if 0 <= g < 10:
            likelihood[index[h], g] += w
    rows = likelihood.sum(axis=1, keepdims=True)
    likelihood = np.divide(likelihood, rows, out=np.zeros_like(likelihood), where=rows > 0)
    codes = np.array([index[g] for g in people.tolist()], dtype=np.int64)
    counts = np.zeros((n_queries, len(grades)))
    np.add.at(counts, (people_query, codes), 1.0)
    pool = counts.sum(axis=0) / max(counts.sum(), 1.0)
    prior = (counts + PRIOR_PAIRS * pool) / (counts.sum(axis=1, keepdims=True) + PRIOR_PAIRS)
    if holes_sample:
        # The overlap is a sample of the holes: their grades differ from the judged pool's
        # (a new system's holes are more often relevant). Each query's prior is shifted by the
        # ratio of the holes' share of each grade (the sample, 1/pi weighted) to the pool's.
        share = np.zeros(len(grades))
        np.add.at(share, [index[h] for h in human.tolist()], weights)
        share /= share.sum()
        ratio = np.divide(share, pool, out=np.zeros_like(share), where=pool > 0)
        prior = prior * ratio
        prior /= np.maximum(prior.sum(axis=1, keepdims=True), 1e-300)
    return _Imputer(grades, likelihood, prior)


def _draw(
    imputer: _Imputer,
    rng: np.random.Generator,
    grades: Int,
    first: int,
    query_code: Int,
    raw: tuple[Int, Int],
    pairs: Int,
    llm: Int,
) -> tuple[Int, Int]:
    """One imputation: the grades with the holes (from `first` on) drawn, and a predicted grade
    of each overlap pair."""
    hole_raw, pair_raw = raw
    base = grades.copy()
    base[first:] = imputer.draw(rng, query_code[first:], hole_raw, grades[first:])
    return base, imputer.draw(rng, query_code[pairs], pair_raw, llm)


def corrected_interval(
    coded: Mapping[str, Ranked],
    measures: Sequence[Measure],
    grades: Int,
    pairs: Int,
    llm: Int,
    weights: Float,
    holes: int,
    *,
    raw: tuple[Int, Int] | None = None,
    missing: Missing = "zero",
    level: float = 0.95,
    imputations: int = 5,
    seed: int = 0,
    holes_sample: bool = False,
    effects_out: dict[str, tuple[Float, Float]] | None = None,
) -> tuple[dict[str, dict[str, Interval]], str]:
    """Per run and measure, the corrected filled score and its interval (module docstring).

    `coded` holds each run joined with the merged qrels coded by pair index into `grades`
    (people's grades first, then the LLM's on the last `holes` pairs); `pairs` are the overlap
    pairs' indices, `llm` their LLM grades (as merged), `weights` their 1/pi. `raw` gives the
    LLM's own grades (before any scale map) of the holes and of the overlap pairs.
    `holes_sample`: the overlap is a sample of the holes (the holes' prior shifts to its
    grades). `effects_out` gets each run's (means [m, measures], effects [m, n, measures]), for
    differences between runs on the same imputations (`grader.evaluation.fill.difference`).
    """
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    n = len(pairs)
    hole_raw, pair_raw = raw if raw is not None else (grades[len(grades) - holes :], llm)
    first = len(grades) - holes
    some = next(iter(coded.values()))
    query_code = np.zeros(len(grades), dtype=np.int64)
    query_code[some.ideal_grade] = some.ideal_query  # the coded ideal lists every pair
    people = (grades[:first], query_code[:first])
    imputer = _imputer(grades[pairs], pair_raw, weights, *people, some.n_queries, holes_sample)
    rng = np.random.default_rng(seed)
    draws = [
        _draw(imputer, rng, grades, first, query_code, (hole_raw, pair_raw), pairs, llm)
        for _ in range(imputations)
    ]
    out: dict[str, dict[str, Interval]] = {}
    for run, ranked in coded.items():
        found = [
            pair_effects(ranked, measures, base, pairs, predicted, missing=missing)
            for base, predicted in draws
        ]
        means = np.array([m for m, _ in found])
        effects = np.array([d for _, d in found])
        if effects_out is not None:
            effects_out[run] = (means, effects)
        est, var = combine(means, effects, weights, holes, first_order(measures))
        out[run] = {
            str(m): _interval(m, e, z * s, level, n)
            for m, e, s in zip(measures, est.tolist(), np.sqrt(var).tolist(), strict=True)
        }
    return out, _note(level, n, holes)


def _note(level: float, n: int, holes: int) -> str:
    return (
        f"{level:.0%} interval of the filled score: {METHOD}, from {n} pairs graded by both "
        f"people and the LLM, {holes} holes; centred on the corrected score (both held to "
        "0..1 for measures that lie there)"
    )


def combine(
    means: Float,
    effects: Float,
    weights: Float,
    holes: int,
    first_order: npt.NDArray[np.bool_] | None = None,
) -> tuple[Float, Float]:
    """The corrected score and its variance, per measure, from m imputations.

    `means` [m, measures]: the run's mean scores on each imputed base; `effects` [m, n,
    measures]: each overlap pair's effect d under each imputation; `weights`: the pairs' 1/pi.
    Each pair's effect is averaged over the imputations first (d-bar), so the imputation noise
    it carries is counted once, divided by m; the estimate is mean(means) + H mean_w(d-bar),
    its variance H^2 var_w(d-bar) / n_eff (the mean is estimated) + H var_w(d-bar) (which pairs
    are holes) + B / m, B the variance of the m estimates mean_i + H mean_w(d_i) (what the
    imputations add beyond the pairs' effects, such as nDCG's ideal).

    The measures marked `first_order` (see `first_order`: AP, RR, recall, ...) keep Rubin's
    rules on each imputation, which count the imputation noise twice: that slack is what made
    their intervals cover in simulation (bench/fill_dl2019.py); with the noise counted once,
    AP(rel=2) covered 14 of 20 seeds for the best run, R(rel=2)@100 16 of 20 for the random one.
    """
    m, n = effects.shape[0], effects.shape[1]
    w = weights / weights.sum()
    n_eff = float(weights.sum() ** 2 / (weights**2).sum())
    d_bar = effects.mean(axis=0)
    mean_d = w @ d_bar
    var_d = (w[:, None] * (d_bar - mean_d) ** 2).sum(axis=0) * n / max(n - 1, 1)
    each = means + holes * np.einsum("i,jim->jm", w, effects)
    between = each.var(axis=0, ddof=1) if m > 1 else np.zeros(means.shape[1])
    estimate = each.mean(axis=0)
    variance = holes**2 * var_d / n_eff + holes * var_d + between / m
    if first_order is not None and first_order.any():
        # Rubin's rules: each imputation's own variance, plus (1 + 1/m) B.
        dev = effects - np.einsum("i,jim->jm", w, effects)[:, None, :]
        var_j = np.einsum("i,jim->jm", w, dev**2) * n / max(n - 1, 1)
        within = (holes**2 * var_j / n_eff + holes * var_j).mean(axis=0)
        rubin = within + (1 + 1 / m) * between
        variance = np.where(first_order, rubin, variance)
    return estimate, variance


def _interval(measure: Measure, estimate: float, half: float, level: float, n: int) -> Interval:
    """estimate +- half, each end (and the estimate) held to 0..1 when the measure lies there."""
    ends = [estimate, estimate - half, estimate + half]
    if within_unit(measure):
        ends = [min(max(v, 0.0), 1.0) for v in ends]
    return Interval(float(ends[0]), float(ends[1]), float(ends[2]), level, n)


LINEAR = frozenset({"nDCG", "P", "Judged", "NumRet", "NumRelRet"})


def first_order(measures: Sequence[Measure]) -> npt.NDArray[np.bool_]:
    """Which measures keep Rubin's rules: all but those linear in the run's grades given an
    ideal the holes barely move (`LINEAR`, nDCG with a cutoff). AP, RR, ERR, Bpref, Success
    are corrected to first order; recall's, R-precision's and NumRel's denominators, and the
    ideal of nDCG without a cutoff, carry much of the holes' uncertainty in the qrels-only
    terms, which averaged effects do not hold; a plug-in measure is not assumed linear."""
    return np.array(
        [m.name not in LINEAR or (m.name == "nDCG" and m.cutoff is None) for m in measures],
        dtype=bool,
    )


def within_unit(measure: Measure) -> bool:
    """Whether the measure's mean lies in 0..1: every built-in measure that is averaged (a
    count is summed; a plug-in measure declares no range, so none is assumed)."""
    from grader.metrics import registry
    from grader.metrics.builtin import MODULES

    found = registry.get(measure.name)
    builtin = {f"grader.metrics.{module}" for module in MODULES}
    return not found.summed and found.compute.__module__ in builtin
