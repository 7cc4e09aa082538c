"""Spot-check sampling with the exact inclusion probability pi of every pair (summing to n, each
<= 1), drawn systematically along a list ordered by stratum, so calibration can weight by 1/pi.
Each strategy's strata and pi: `_labels`, `stratum_pi` and `plan_design`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from calibration.spotcheck.sequential import (
    UNIFORM_SHARE,
    active_weights,
    estimand_uncertainty,
    inclusion_approx,
    sequential_draw,
    uniform_draw_probabilities,
    variance_factor,
)
from grader.errors import InputError
from grader.models import Judgment

STRATEGIES: tuple[str, ...] = (
    "uniform",
    "stratified",
    "uncertainty",
    "active",
    "low",
    "query-balanced",
    "whole-queries",
)
ALLOCATIONS: tuple[str, ...] = ("equal", "proportional")


@dataclass(frozen=True)
class SampledPair:
    """One drawn pair, its exact inclusion probability and the stratum it was drawn from."""

    query_id: str
    doc_id: str
    inclusion_probability: float
    stratum: str
    uncertainty: float | None = None
    draw_probability: float | None = None  # uniform and active: P(drawn at its position)


@dataclass
class SampleDraw:
    """A design (each eligible pair's stratum and inclusion probability under one strategy) and,
    once drawn (`draw_from`), its pairs in a seeded random order."""

    strategy: str
    allocation: str | None
    population: int
    strata: dict[str, dict[str, int | float]] = field(default_factory=dict)
    pairs: list[SampledPair] = field(default_factory=list)
    seed: int = 0
    judgments: list[Judgment] = field(default_factory=list, repr=False)
    labels: list[str] = field(default_factory=list, repr=False)
    pi: np.ndarray = field(default_factory=lambda: np.zeros(0), repr=False)
    uncertainty: np.ndarray | None = field(default=None, repr=False)
    uncertainty_source: str | None = None
    uncertainty_imputed: int = 0
    queries_drawn: int | None = None  # whole-queries: how many queries are drawn
    weights: np.ndarray | None = field(default=None, repr=False)  # active: successive sampling
    uniform_share: float | None = None
    threshold: int | None = None

    @property
    def variance_factor(self) -> float | None:
        """Active: the successive-sampling weights' variance factor (`sequential`)."""
        return None if self.weights is None else variance_factor(self.weights)


def strata_of(labels: Sequence[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The sorted stratum names, each unit's stratum index and each stratum's size."""
    keys = sorted(set(labels))
    index = {k: i for i, k in enumerate(keys)}
    stratum_of = np.array([index[k] for k in labels], dtype=np.int64)
    return keys, stratum_of, np.bincount(stratum_of, minlength=len(keys)).astype(np.float64)


def strata_table(
    keys: list[str], sizes: np.ndarray, expected: np.ndarray
) -> dict[str, dict[str, int | float]]:
    """Each stratum's size and expected count, as the manifest records them."""
    return {k: {"size": int(sizes[i]), "expected": float(expected[i])} for i, k in enumerate(keys)}


def stratified_draw(pi: np.ndarray, stratum_of: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A systematic draw along a list ordered by stratum, random inside each."""
    groups = range(int(stratum_of.max()) + 1)
    order = np.concatenate([rng.permutation(np.flatnonzero(stratum_of == s)) for s in groups])
    return systematic_draw(pi, order, rng)


def sample_size(population: int, *, n: int | None = None, fraction: float | None = None) -> int:
    """The number of pairs to draw from `n` or `fraction` (rounded, at least 1)."""
    if (n is None) == (fraction is None):
        raise InputError("give exactly one of --n and --fraction")
    if fraction is not None and not 0 < fraction <= 1:
        raise InputError(f"--fraction must be in (0, 1], got {fraction}")
    size = n if n is not None else max(1, round((fraction or 0) * population))
    if size < 1:
        raise InputError(f"--n must be at least 1, got {size}")
    if size > population:
        raise InputError(
            f"asked for {size} pairs but only {population} eligible judgments exist",
            hint="lower --n or --fraction",
        )
    return size


def allocate(shares: np.ndarray, caps: np.ndarray, n: float) -> np.ndarray:
    """Water-filling: split `n` in proportion to `shares`, no part above its cap (the excess is
    re-shared). Returns real expected counts."""
    shares = np.asarray(shares, dtype=np.float64)
    caps = np.asarray(caps, dtype=np.float64)
    if n > caps[shares > 0].sum() + 1e-9:
        raise InputError("the sample is larger than the strata it may be drawn from")
    out = np.zeros_like(shares)
    capped = np.zeros(shares.shape, dtype=bool)
    free = shares > 0
    while True:
        remaining = n - caps[capped].sum()
        total = shares[free & ~capped].sum()
        if total <= 0:
            break
        level = remaining / total
        want = level * shares
        newly = free & ~capped & (want >= caps)
        if not newly.any():
            out[free & ~capped] = want[free & ~capped]
            break
        capped |= newly
    out[capped] = caps[capped]
    return out


def _integer_counts(expected: np.ndarray) -> np.ndarray:
    """Round expected counts to integers (largest remainder), keeping their sum; unchanged
    when a non-empty stratum would get no draw (pi = 0)."""
    total = round(expected.sum())
    floors = np.floor(expected + 1e-9)
    rest = total - int(floors.sum())
    order = np.argsort(-(expected - floors), kind="stable")
    counts = floors.copy()
    counts[order[:rest]] += 1
    if np.any((expected > 0) & (counts == 0)):
        return expected
    return counts


def systematic_draw(pi: np.ndarray, order: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Indices drawn systematically along `order`; unit i is drawn with probability pi[i]."""
    cum = np.cumsum(pi[order])
    n = round(float(cum[-1]))
    cum *= n / cum[-1]  # rounding error must not push the last point past the end
    points = rng.uniform(0.0, 1.0) + np.arange(n)
    hits = np.searchsorted(cum, points, side="right")
    hits = np.minimum(hits, len(order) - 1)
    return np.asarray(order[np.unique(hits)])


def _uncertainties(judgments: Sequence[Judgment]) -> tuple[np.ndarray, str, int]:
    """Per-pair uncertainty, its source, and how many pairs lacked it (scale's maximum given)."""
    conf = [j.confidence for j in judgments]
    dis = [j.disagreement for j in judgments]
    if any(c is not None for c in conf):
        values, source = [None if c is None else 1.0 - c for c in conf], "1 - confidence"
    elif any(d is not None for d in dis):
        values, source = list(dis), "disagreement"
    else:
        raise InputError(
            "uncertainty sampling needs a logprob distribution (confidence) or an ensemble "
            "disagreement, and none of the judgments has either",
            hint="grade with logprobs (a prompt with logprobs = true, without --no-logprobs) "
            "or several --model, or use --strategy stratified",
        )
    # A pair without the measure (no logprobs; a failed ensemble member) is as uncertain as can
    # be: the scale's maximum, 1 for 1 - confidence and 3 for a disagreement of grades 0..3.
    top = 1.0 if source == "1 - confidence" else 3.0
    missing = sum(v is None for v in values)
    return np.array([top if v is None else v for v in values], dtype=np.float64), source, missing


def _check_population(pop: list[Judgment]) -> None:
    if not pop:
        raise InputError("no eligible judgments to sample from")
    seen: set[tuple[str, str]] = set()
    for j in pop:
        if j.status != "ok" or j.grade is None:
            raise InputError(
                f"judgment ({j.query_id}, {j.doc_id}) is not ok: a failed judgment is no grade"
            )
        pair = (j.query_id, j.doc_id)
        if pair in seen:
            raise InputError(
                f"pair ({j.query_id}, {j.doc_id}) is graded twice in the judgments",
                hint="sample from one judge's output, one judgment per pair",
            )
        seen.add(pair)


def _labels(pop: list[Judgment], strategy: str, low_share: float) -> list[str]:
    if strategy == "uniform":
        return ["all"] * len(pop)
    if strategy in ("stratified", "uncertainty", "active"):
        return [f"grade={j.grade}" for j in pop]
    if strategy == "low":
        if not 0 < low_share < 1:
            raise InputError(f"--low-share must be in (0, 1), got {low_share}")
        return ["grades 0-1" if (j.grade or 0) <= 1 else "grades 2-3" for j in pop]
    return [j.query_id for j in pop]


def plan_design(
    judgments: Iterable[Judgment],
    *,
    strategy: str,
    size: int,
    allocation: str = "equal",
    low_share: float = 0.8,
    floor: float = 0.05,
    uniform_share: float = UNIFORM_SHARE,
    threshold: int = 2,
) -> SampleDraw:
    """Strata and exact inclusion probabilities (summing to `size`) of every eligible pair."""
    if strategy not in STRATEGIES:
        raise InputError(f"unknown strategy {strategy!r}", hint=f"one of {', '.join(STRATEGIES)}")
    if allocation not in ALLOCATIONS:
        raise InputError(f"unknown allocation {allocation!r}", hint="equal or proportional")
    pop = list(judgments)
    _check_population(pop)
    labels = _labels(pop, strategy, low_share)
    keys, stratum_of, sizes = strata_of(labels)
    extra: dict[str, Any] = {}
    if strategy == "active":
        if not 0 < uniform_share <= 1:
            raise InputError(f"--uniform-share must be in (0, 1], got {uniform_share}")
        unc, source, imputed = estimand_uncertainty(pop, threshold)
        weights = active_weights(unc, uniform_share)
        pi = inclusion_approx(weights, size)
        extra = {"weights": weights, "uniform_share": uniform_share, "threshold": threshold}
    elif strategy == "uncertainty":
        if floor <= 0:
            raise InputError(f"--floor must be > 0 so every pair can be drawn, got {floor}")
        unc, source, imputed = _uncertainties(pop)
        pi = allocate(unc + floor, np.ones(len(pop)), size)
    else:
        pi, expected, drawn = stratum_pi(
            strategy, allocation, keys, sizes, stratum_of, size, low_share
        )
        extra = {"queries_drawn": drawn}
    if strategy in ("active", "uncertainty"):
        expected = np.bincount(stratum_of, weights=pi, minlength=len(keys))
        extra |= {"uncertainty": unc, "uncertainty_source": source, "uncertainty_imputed": imputed}
    return SampleDraw(
        strategy=strategy,
        allocation=allocation if strategy == "stratified" else None,
        population=len(pop),
        strata=strata_table(keys, sizes, expected),
        judgments=pop,
        labels=labels,
        pi=np.clip(pi, 0.0, 1.0),
        **extra,
    )


def stratum_pi(
    strategy: str,
    allocation: str,
    keys: list[str],
    sizes: np.ndarray,
    stratum_of: np.ndarray,
    size: int,
    low_share: float,
) -> tuple[np.ndarray, np.ndarray, int | None]:
    """pi and each stratum's expected count when a stratum's pairs share one pi, and how many
    whole queries are drawn (whole-queries only)."""
    if strategy == "whole-queries":
        drawn = min(len(keys), max(1, round(size * len(keys) / len(stratum_of))))
        return np.full(len(stratum_of), drawn / len(keys)), sizes * drawn / len(keys), drawn
    if strategy == "uniform" or (strategy == "stratified" and allocation == "proportional"):
        shares = sizes
    elif strategy == "low":
        shares = np.array([low_share if k == "grades 0-1" else 1 - low_share for k in keys])
    else:
        shares = np.ones(len(keys))
    expected = allocate(shares, sizes, size)
    if strategy == "stratified":
        expected = _integer_counts(expected)
    return (expected / sizes)[stratum_of], expected, None


def draw_from(design: SampleDraw, seed: int) -> SampleDraw:
    """Draw one sample from a design; the pairs come back in a seeded random order."""
    rng = np.random.default_rng(seed)
    keys, stratum_of, _ = strata_of(design.labels)
    p_draw: np.ndarray | None = None
    if design.weights is not None:  # active: successive sampling, in the order drawn
        chosen, p_draw = sequential_draw(design.weights, round(float(design.pi.sum())), rng)
    elif design.queries_drawn is not None:  # whole-queries: every pair of m random queries
        picked = rng.choice(len(keys), size=design.queries_drawn, replace=False)
        chosen = rng.permutation(np.flatnonzero(np.isin(stratum_of, picked)))
    else:
        chosen = rng.permutation(stratified_draw(design.pi, stratum_of, rng))
        if design.strategy == "uniform":  # a uniform sample in random order: successive SRS
            p_draw = uniform_draw_probabilities(len(chosen), design.population)
    pop, unc = design.judgments, design.uncertainty
    pairs = [
        SampledPair(
            query_id=pop[i].query_id,
            doc_id=pop[i].doc_id,
            inclusion_probability=float(design.pi[i]),
            stratum=design.labels[i],
            uncertainty=None if unc is None else float(unc[i]),
            draw_probability=None if p_draw is None else float(p_draw[t]),
        )
        for t, i in enumerate(chosen)
    ]
    return replace(design, pairs=pairs, seed=seed)


def draw_sample(
    judgments: Iterable[Judgment],
    *,
    n: int | None = None,
    fraction: float | None = None,
    seed: int = 0,
    **design: Any,
) -> SampleDraw:
    """Draw a spot-check sample from ok judgments (one per pair); `design`: `plan_design`'s
    options. The caller leaves out failed judgments and pairs people already graded."""
    pop = list(judgments)
    size = sample_size(len(pop), n=n, fraction=fraction)
    return draw_from(plan_design(pop, size=size, **design), seed)
