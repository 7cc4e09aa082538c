"""Quantiles of Student's t with whole degrees of freedom, without scipy at run time.

The two-sided mass P(|T| < t) has a closed form for integer df (Abramowitz and Stegun 26.7.3-4,
with theta = atan(t / sqrt(df))); the quantile is found by bisection on it. Cross-checked against
scipy.stats.t in the tests to 1e-12.
"""

from __future__ import annotations

import math
from functools import lru_cache


def two_sided_mass(t: float, df: int) -> float:
    """P(|T| < t) for T ~ Student t with `df` (>= 1) degrees of freedom and t >= 0."""
    theta = math.atan(t / math.sqrt(df))
    s, c = math.sin(theta), math.cos(theta)
    if df % 2:
        if df == 1:
            return 2.0 * theta / math.pi
        term = total = c
        for k in range(3, df - 1, 2):
            term *= c * c * (k - 1) / k
            total += term
        return 2.0 / math.pi * (theta + s * total)
    term = total = 1.0
    for k in range(2, df - 1, 2):
        term *= c * c * (k - 1) / k
        total += term
    return s * total


@lru_cache(maxsize=256)
def t_quantile(level: float, df: int) -> float:
    """The t with P(|T| < t) = level (0 < level < 1): the multiplier of a two-sided interval."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if df < 1:
        raise ValueError(f"a t quantile needs at least 1 degree of freedom, got {df}")
    low, high = 0.0, 1.0
    while two_sided_mass(high, df) < level:
        high *= 2.0
    for _ in range(200):
        mid = (low + high) / 2.0
        if two_sided_mass(mid, df) < level:
            low = mid
        else:
            high = mid
        if high - low < 1e-14 * high:
            break
    return (low + high) / 2.0
