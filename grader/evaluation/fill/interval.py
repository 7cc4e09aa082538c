"""An interval for a filled score that carries the LLM's disagreement with people: a PPI-style
correction on an imputed base (docs/filling-holes.md, "the method"). Holes get human grades drawn
from P(human | LLM grade, query); each overlap pair's effect d corrects the base by H * mean_w(d);
five imputations are combined (`combine`). A pair changes only its own query's score, so one
rescoring per round serves one pair per query. Two runs' difference is estimated jointly."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from grader.metrics.evaluate import Missing, score
from grader.metrics.judged_rows import Float, Int, Ranked, ideal_of
from grader.metrics.measures import Measure, is_summed
from grader.metrics.rank_order import ranks_within

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


@dataclass(frozen=True)
class Overlap:
    """The merged qrels coded by pair index (`grades`: people's, then the LLM's on the last
    `holes`), and the pairs graded by both: `pairs` their indices, `llm` their LLM grades (mapped),
    `weights` their 1/pi; `hole_raw`, `pair_raw` the LLM's own grades (before a scale map) of the
    holes and the pairs; `query_code` each pair's query among `n_queries`."""

    grades: Int
    holes: int
    pairs: Int
    llm: Int
    weights: Float
    hole_raw: Int
    pair_raw: Int
    query_code: Int
    n_queries: int

    @property
    def first(self) -> int:
        """The index of the first hole."""
        return len(self.grades) - self.holes


def rescored(ranked: Ranked, grades: Int) -> Ranked:
    """A coded `Ranked` (grade = the pair's index in `grades`) with the pairs' grades put in."""
    ideal = ideal_of(ranked.ideal_query, grades[ranked.ideal_grade])._asdict()
    fields = {f"ideal_{key}": value for key, value in ideal.items()}
    return dataclasses.replace(ranked, grade=grades[ranked.grade], **fields)


def pair_effects(
    ranked: Ranked,
    measures: Sequence[Measure],
    grades: Int,
    overlap: Overlap,
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
    codes = overlap.query_code[overlap.pairs]
    col = np.array([column.get(ranked.query_ids[c], -1) for c in codes.tolist()], dtype=np.int64)
    effects = np.zeros((len(overlap.pairs), len(measures)), dtype=np.float64)
    by_query = np.argsort(codes, kind="stable")
    rounds = np.empty(len(codes), dtype=np.int64)  # a pair's position among its query's pairs
    rounds[by_query] = ranks_within(codes[by_query]) - 1
    for r in range(int(rounds.max()) + 1 if len(rounds) else 0):
        chosen = np.flatnonzero((rounds == r) & (col >= 0))
        if not len(chosen):
            continue
        swapped = grades.copy()
        swapped[overlap.pairs[chosen]] = llm[chosen]
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
    """A human grade for pairs people did not grade, by Bayes' rule: P(h | l, q) ~ P(l | h) P_q(h),
    P(l | h) from the overlap (1/pi weighted), P_q(h) from people's grades of query q shrunk towards
    the pool's (`PRIOR_PAIRS` pseudo-pairs)."""

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


def _imputer(overlap: Overlap, holes_sample: bool) -> _Imputer:
    """The imputer from the overlap pairs and every human grade; `holes_sample`: the overlap is a
    sample of the holes."""
    human, llm, weights = overlap.grades[overlap.pairs], overlap.pair_raw, overlap.weights
    people, people_query = overlap.grades[: overlap.first], overlap.query_code[: overlap.first]
    grades = np.unique(np.concatenate([human, people]))
    likelihood = np.zeros((len(grades), 10))
    known = (llm >= 0) & (llm < 10)
    np.add.at(likelihood, (np.searchsorted(grades, human[known]), llm[known]), weights[known])
    rows = likelihood.sum(axis=1, keepdims=True)
    likelihood = np.divide(likelihood, rows, out=np.zeros_like(likelihood), where=rows > 0)
    counts = np.zeros((overlap.n_queries, len(grades)))
    np.add.at(counts, (people_query, np.searchsorted(grades, people)), 1.0)
    pool = counts.sum(axis=0) / max(counts.sum(), 1.0)
    prior = (counts + PRIOR_PAIRS * pool) / (counts.sum(axis=1, keepdims=True) + PRIOR_PAIRS)
    if holes_sample:
        # The overlap is a sample of the holes: their grades differ from the judged pool's
        # (a new system's holes are more often relevant). Each query's prior is shifted by the
        # ratio of the holes' share of each grade (the sample, 1/pi weighted) to the pool's.
        share = np.zeros(len(grades))
        np.add.at(share, np.searchsorted(grades, human), weights)
        share /= share.sum()
        ratio = np.divide(share, pool, out=np.zeros_like(share), where=pool > 0)
        prior = prior * ratio
        prior /= np.maximum(prior.sum(axis=1, keepdims=True), 1e-300)
    return _Imputer(grades, likelihood, prior)


def corrected_interval(
    coded: Mapping[str, Ranked],
    measures: Sequence[Measure],
    overlap: Overlap,
    *,
    missing: Missing = "zero",
    level: float = 0.95,
    imputations: int = 5,
    seed: int = 0,
    holes_sample: bool = False,
) -> tuple[dict[str, dict[str, Interval]], dict[str, tuple[Float, Float]]]:
    """Per run and measure, the corrected filled score and its interval, and each run's (means,
    effects) for `corrected_differences`; `coded`: each run joined with the merged qrels coded by
    pair index into `overlap.grades`."""
    grades, code, first = overlap.grades, overlap.query_code, overlap.first
    imputer = _imputer(overlap, holes_sample)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(imputations):
        base = grades.copy()
        base[first:] = imputer.draw(rng, code[first:], overlap.hole_raw, grades[first:])
        draws.append((base, imputer.draw(rng, code[overlap.pairs], overlap.pair_raw, overlap.llm)))
    out: dict[str, dict[str, Interval]] = {}
    effects: dict[str, tuple[Float, Float]] = {}
    for run, ranked in coded.items():
        found = [
            pair_effects(ranked, measures, base, overlap, predicted, missing=missing)
            for base, predicted in draws
        ]
        effects[run] = (np.array([m for m, _ in found]), np.array([d for _, d in found]))
        out[run] = intervals(*effects[run], overlap.weights, overlap.holes, measures, level)
    return out, effects


def intervals(
    means: Float,
    effects: Float,
    weights: Float,
    holes: int,
    measures: Sequence[Measure],
    level: float,
    method: str = METHOD,
) -> dict[str, Interval]:
    """Each measure's `level` interval from m imputations (`combine`); a run's score (`method`
    METHOD), not a difference, is held to 0..1 where the measure lies there (`within_unit`)."""
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    est, var = combine(means, effects, weights, holes, first_order(measures))
    out = {}
    for m, e, s in zip(measures, est.tolist(), np.sqrt(var).tolist(), strict=True):
        low, high = e - z * s, e + z * s
        if method == METHOD and within_unit(m):
            e, low, high = (min(max(v, 0.0), 1.0) for v in (e, low, high))
        out[str(m)] = Interval(e, low, high, level, len(weights), method)
    return out


def note(level: float, overlap: Overlap) -> str:
    """How the intervals were made."""
    return (
        f"{level:.0%} interval of the filled score: {METHOD}, from {len(overlap.pairs)} pairs "
        f"graded by both people and the LLM, {overlap.holes} holes; centred on the corrected "
        "score (both held to 0..1 for measures that lie there)"
    )


def combine(
    means: Float,
    effects: Float,
    weights: Float,
    holes: int,
    first_order: npt.NDArray[np.bool_] | None = None,
) -> tuple[Float, Float]:
    """The corrected score and its variance, per measure, from m imputations: `means` [m,
    measures], `effects` [m, n, measures], `weights` the pairs' 1/pi. Each pair's effect is
    averaged over the imputations first; the `first_order` measures keep Rubin's rules."""
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


LINEAR = frozenset({"nDCG", "P", "Judged", "NumRet", "NumRelRet"})


def first_order(measures: Sequence[Measure]) -> npt.NDArray[np.bool_]:
    """Which measures keep Rubin's rules: all but those linear in the run's grades given an ideal
    the holes barely move (`LINEAR`, nDCG with a cutoff); a plug-in is not assumed linear."""
    return np.array(
        [m.name not in LINEAR or (m.name == "nDCG" and m.cutoff is None) for m in measures],
        dtype=bool,
    )


def within_unit(measure: Measure) -> bool:
    """Whether the measure's mean lies in 0..1: every built-in measure that is averaged (a
    count is summed; a plug-in measure declares no range, so none is assumed)."""
    from grader.metrics import registry

    found = registry.get(measure.name)
    builtin = {f"grader.metrics.{module}" for module in registry.MODULES}
    return not found.summed and found.compute.__module__ in builtin


DIFFERENCE = "difference of the corrected filled scores, on shared imputations and overlap pairs"


def corrected_differences(
    effects: Mapping[str, tuple[Float, Float]],
    baseline: str,
    measures: Sequence[Measure],
    weights: Float,
    holes: int,
    *,
    level: float = 0.95,
    refused: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, dict[str, Interval]]:
    """Per run other than `baseline` and measure: the corrected difference and its `level` interval,
    from `effects` (`corrected_interval`'s); none where either run was `refused`."""
    base_means, base_effects = effects[baseline]
    skip = {**(refused or {}).get(baseline, {})}
    out: dict[str, dict[str, Interval]] = {}
    for run, (means, run_effects) in effects.items():
        if run != baseline:
            d, d_effects = means - base_means, run_effects - base_effects
            found = intervals(d, d_effects, weights, holes, measures, level, DIFFERENCE)
            gone = {**skip, **(refused or {}).get(run, {})}
            out[run] = {name: iv for name, iv in found.items() if name not in gone}
    return out


def p_value(interval: Interval) -> float:
    """The two-sided p-value of "no difference" from a difference's normal interval (the
    z-test its interval inverts); 1.0 for an interval of no width around 0."""
    dist = NormalDist()
    half = interval.high - interval.estimate
    se = half / dist.inv_cdf(0.5 + interval.level / 2.0)
    if se <= 0:
        return 1.0 if interval.estimate == 0 else 0.0
    return 2.0 * (1.0 - dist.cdf(abs(interval.estimate) / se))
