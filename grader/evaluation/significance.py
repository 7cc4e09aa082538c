"""Paired significance tests between two runs' per-query scores, and multiple-test corrections.

Each test takes the per-query differences d (run minus baseline, one per query both are scored
on) and gives the mean difference, a two-sided p-value and a 95% interval of the mean difference:

- `t`: the paired Student t test (scipy's `ttest_rel`): t = mean(d) / (sd(d) / sqrt(n)) with
  n - 1 degrees of freedom; the interval is mean(d) +- t_{0.975, n-1} sd(d) / sqrt(n).
- `randomization`: Fisher's paired randomization test (Smucker et al., CIKM 2007; ranx's
  `fisher_randomization_test`): under the null hypothesis each query's two scores are
  exchangeable, so each difference's sign is flipped at random; p is the share of sign
  patterns whose |mean| reaches the observed |mean(d)|. All 2^n patterns are enumerated when
  2^n <= `permutations` (the exact p-value); else `permutations` random patterns, and p is
  their share with no +1 in numerator and denominator, as ranx computes it (a p-value of 0 then
  reads "below 1 / permutations"). The interval is the percentile bootstrap's (below): a
  randomization test has no interval of its own without inverting it over shifts.
- `bootstrap`: the paired bootstrap (Efron and Tibshirani 1993, 16.4): `permutations`
  resamples of the n queries with replacement. The interval is the percentile interval of the
  resampled means (scipy's `bootstrap(..., method="percentile")`, the same draws for the same
  seed); p is the share of resampled means, shifted to the null (mean 0), whose |mean| reaches
  the observed |mean(d)|, with no +1 either.

Draws come from `numpy.random.default_rng(seed)`, new for each comparison: the same seed gives
the same p-values, whichever other runs and measures are compared. A tie with the observed
statistic counts as reaching it (within 1e-10 of sum|d|: a rounding error is not a difference).

Fewer than two queries: p-value and interval are NaN. All differences equal (no spread): the
t test's p-value is 1 when they are 0 and 0 otherwise, and its interval is that one value
(scipy gives NaN there).

`adjust` corrects a family of p-values: Holm's step-down or Bonferroni (statsmodels'
`multipletests`), NaN p-values left out of the family and kept NaN.
"""

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
