"""Paired significance tests on two runs' per-query differences d (mean, two-sided p, 95%
interval; docs/significance.md): `t` (scipy's `ttest_rel`), `randomization` (exact when 2^n <=
`permutations`, p as ranx computes it) and `bootstrap` (scipy's percentile interval), draws from
`default_rng(seed)`; a tie within 1e-10 of sum|d| reaches the observed. `adjust`: Holm or
Bonferroni as statsmodels', NaN kept out."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

import numpy as np
import numpy.typing as npt

from grader.evaluation.student_t import t_quantile, two_sided_p

Test = Literal["t", "randomization", "bootstrap"]
Correction = Literal["holm", "bonferroni", "none"]
TESTS: tuple[str, ...] = get_args(Test)
CORRECTIONS: tuple[str, ...] = get_args(Correction)
LEVEL = 0.95
"""The confidence level of every interval."""
PERMUTATIONS = 10_000
"""Random sign patterns (randomization) or resamples (bootstrap) by default."""

_ALL_BITS = np.iinfo(np.uint64).max
_CELLS = 1 << 21
"""Draws held in memory at once (a batch of patterns or resamples times n)."""


@dataclass(frozen=True)
class Paired:
    """One paired comparison: n queries, mean difference, two-sided p-value, 95% interval."""

    n: int
    diff: float
    p_value: float
    ci_low: float
    ci_high: float


def paired_test(
    run: npt.ArrayLike,
    baseline: npt.ArrayLike,
    test: Test = "t",
    *,
    permutations: int = PERMUTATIONS,
    seed: int = 0,
) -> Paired:
    """Compare `run` with `baseline`, two arrays of per-query scores on the same queries in
    the same order, by `test` (see the module docstring)."""
    d = np.asarray(run, dtype=np.float64) - np.asarray(baseline, dtype=np.float64)
    return paired_differences(d, test, permutations=permutations, seed=seed)


def paired_differences(
    d: npt.ArrayLike, test: Test = "t", *, permutations: int = PERMUTATIONS, seed: int = 0
) -> Paired:
    """`paired_test` on the per-query differences `d` themselves."""
    d = np.asarray(d, dtype=np.float64).ravel()
    if test not in TESTS:
        raise ValueError(f"test must be one of {', '.join(TESTS)}, not {test!r}")
    if permutations < 1:
        raise ValueError(f"permutations must be at least 1, not {permutations}")
    n = d.size
    diff = math.fsum(d.tolist()) / n if n else float("nan")
    if n < 2:
        return Paired(n, diff, float("nan"), float("nan"), float("nan"))
    if test == "t":
        p, low, high = _t_test(d, diff)
    elif test == "randomization":
        p = _randomization_p(d, permutations, seed)
        low, high = _bootstrap(d, diff, permutations, seed)[1:]
    else:
        p, low, high = _bootstrap(d, diff, permutations, seed)
    return Paired(n, diff, p, low, high)


def _t_test(d: npt.NDArray[np.float64], diff: float) -> tuple[float, float, float]:
    n = d.size
    sd = float(np.std(d, ddof=1))
    if sd == 0.0:
        return (1.0 if diff == 0.0 else 0.0), diff, diff
    se = sd / math.sqrt(n)
    half = t_quantile(LEVEL, n - 1) * se
    return two_sided_p(diff / se, n - 1), diff - half, diff + half


def _tolerance(d: npt.NDArray[np.float64]) -> float:
    return 1e-10 * float(np.abs(d).sum())


def _randomization_p(d: npt.NDArray[np.float64], permutations: int, seed: int) -> float:
    n = d.size
    observed = abs(float(d.sum())) - _tolerance(d)
    reached = 0
    if n < 63 and 1 << n <= permutations:  # every sign pattern, once: the exact p-value
        bits = np.arange(n, dtype=np.int64)
        start = 0
        for size in _batches(1 << n, n):
            patterns = np.arange(start, start + size, dtype=np.int64)[:, None] >> bits
            signs = 1.0 - 2.0 * (patterns & 1)
            reached += int(np.count_nonzero(np.abs(signs @ d) >= observed))
            start += size
        return reached / (1 << n)
    rng = np.random.default_rng(seed)
    words = (n + 63) // 64
    total = float(d.sum())
    for size in _batches(permutations, n):
        # 64 fair coins a draw; a 1 flips that query's sign: sum = total - 2 * (flipped sum)
        draws = rng.integers(0, _ALL_BITS, (size, words), dtype=np.uint64, endpoint=True)
        flips = np.unpackbits(draws.view(np.uint8), axis=1, bitorder="little")[:, :n]
        reached += int(np.count_nonzero(np.abs(total - 2.0 * (flips @ d)) >= observed))
    return reached / permutations


def _bootstrap(
    d: npt.NDArray[np.float64], diff: float, resamples: int, seed: int
) -> tuple[float, float, float]:
    """(p-value, interval low, interval high) of the paired bootstrap."""
    n = d.size
    rng = np.random.default_rng(seed)
    means = np.concatenate(
        [np.mean(d[rng.integers(0, n, (size, n))], axis=-1) for size in _batches(resamples, n)]
    )
    alpha = (1.0 - LEVEL) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    reached = np.count_nonzero(np.abs(means - diff) >= abs(diff) - _tolerance(d) / n)
    return float(reached) / resamples, float(low), float(high)


def _batches(total: int, n: int) -> list[int]:
    size = max(1, _CELLS // max(n, 1))
    return [min(size, total - start) for start in range(0, total, size)]


def adjust(p_values: npt.ArrayLike, correction: Correction = "holm") -> npt.NDArray[np.float64]:
    """The p-values corrected for being one family: `holm` (step-down), `bonferroni` or
    `none`, as statsmodels' `multipletests` gives them. NaN p-values are not in the family."""
    if correction not in CORRECTIONS:
        raise ValueError(f"correction must be one of {', '.join(CORRECTIONS)}, not {correction!r}")
    p = np.asarray(p_values, dtype=np.float64).ravel()
    out = np.full(p.shape, np.nan)
    known = np.flatnonzero(~np.isnan(p))
    m = known.size
    if correction == "none" or not m:
        out[known] = p[known]
        return out
    if correction == "bonferroni":
        out[known] = np.minimum(1.0, p[known] * m)
        return out
    order = known[np.argsort(p[known], kind="stable")]
    stepped = np.maximum.accumulate(p[order] * np.arange(m, 0, -1))
    out[order] = np.minimum(1.0, stepped)
    return out
