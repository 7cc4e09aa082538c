"""Student's t without scipy at run time: the two-sided tail (the regularized incomplete beta by
its continued fraction, on the side that converges fast) and its quantile, any real df > 0.
Cross-checked against scipy.stats.t in tests/test_significance.py to 1e-12."""

from __future__ import annotations

import math
from functools import lru_cache

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


def incomplete_beta(a: float, b: float, x: float, y: float) -> float:
    """I_x(a, b), the regularized incomplete beta function, with y = 1 - x (both given so
    that neither loses digits to the subtraction)."""
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    if x < (a + 1.0) / (a + b + 2.0):
        return _beta_prefix(a, b, x, y) * _continued_fraction(a, b, x)
    return 1.0 - _beta_prefix(b, a, y, x) * _continued_fraction(b, a, y)


def two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for T ~ Student t with `df` > 0 degrees of freedom (1 at t = 0)."""
    if math.isnan(t) or df <= 0:
        return float("nan")
    if math.isinf(t):
        return 0.0
    t2 = t * t
    return incomplete_beta(df / 2.0, 0.5, df / (df + t2), t2 / (df + t2))


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
