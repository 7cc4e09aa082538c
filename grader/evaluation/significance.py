"""Paired significance tests on two runs' per-query differences d (mean, two-sided p, 95%
interval; docs/significance.md): `t` (scipy's `ttest_rel`), `randomization` (exact when 2^n <=
`permutations`, p as ranx computes it) and `bootstrap` (scipy's percentile interval), draws from
`default_rng(seed)`; a tie within 1e-10 of sum|d| reaches the observed. `adjust`: Holm or
Bonferroni as statsmodels', NaN kept out."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal, get_args

import numpy as np
import numpy.typing as npt

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


def paired_differences(
    d: npt.ArrayLike, test: Test = "t", *, permutations: int = PERMUTATIONS, seed: int = 0
) -> Paired:
    """Compare two runs by their per-query differences `d` (run - baseline, on the same queries)
    by `test` (see the module docstring)."""
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


_TINY = 1e-300
_EPS = 1e-16


def _continued_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of I_x(a, b) (Numerical Recipes 6.4), by modified Lentz."""
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, _nonzero(1.0 - qab * x / qap)
    d = 1.0 / d
    h = d
    for m in range(1, 10_000):
        m2 = 2 * m
        even = m * (b - m) * x / ((qam + m2) * (a + m2))
        odd = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        for coefficient in (even, odd):
            d = 1.0 / _nonzero(1.0 + coefficient * d)
            c = _nonzero(1.0 + coefficient / c)
            step = d * c
            h *= step
        if abs(step - 1.0) < _EPS:
            return h
    raise ArithmeticError(f"the incomplete beta fraction did not converge (a={a}, b={b}, x={x})")


def _nonzero(value: float) -> float:
    return value if abs(value) > _TINY else _TINY


def _beta_prefix(a: float, b: float, x: float, y: float) -> float:
    """x^a y^b / (a B(a, b)), with y = 1 - x given exactly by the caller."""
    log = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(y)
    return math.exp(log) / a


def two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for T ~ Student t with `df` > 0 degrees of freedom (1 at t = 0), without
    scipy at run time: the regularized incomplete beta by its continued fraction, on the side
    that converges fast (cross-checked against scipy.stats.t in the tests to 1e-12)."""
    if math.isnan(t) or df <= 0:
        return float("nan")
    t2, a, b = t * t, df / 2.0, 0.5
    x, y = df / (df + t2), t2 / (df + t2)  # I_x(a, b); y = 1 - x given exactly (no digits lost)
    if x <= 0.0 or y <= 0.0:
        return 0.0 if x <= 0.0 else 1.0
    if x < (a + 1.0) / (a + b + 2.0):
        return _beta_prefix(a, b, x, y) * _continued_fraction(a, b, x)
    return 1.0 - _beta_prefix(b, a, y, x) * _continued_fraction(b, a, y)


@lru_cache(maxsize=256)
def t_quantile(level: float, df: float) -> float:
    """The t with P(|T| < t) = `level` (0 < level < 1): a two-sided interval's multiplier."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if df <= 0:
        raise ValueError(f"a t quantile needs degrees of freedom > 0, got {df}")
    tail = 1.0 - level
    low, high = 0.0, 1.0
    while two_sided_p(high, df) > tail:
        low, high = high, high * 2.0
    for _ in range(200):
        mid = (low + high) / 2.0
        if two_sided_p(mid, df) > tail:
            low = mid
        else:
            high = mid
        if high - low <= 1e-15 * high:
            break
    return (low + high) / 2.0
