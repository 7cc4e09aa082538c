"""An anytime-valid 95% confidence sequence for a share, from grades drawn one at a time with known
probabilities p_t: Des Raj terms z_t = (c_t N + lambda_t F + sum_{j<t} e_j + e_t / p_t) / N, e = Y
- c_t - lambda_t f, (c_t, lambda_t) fitted on earlier grades, are martingale differences (Zrnic
and Candes 2024); the boundary is Waudby-Smith et al.'s normal mixture (Ann. Statist. 2024),
tightest at T_STAR, its variance started from PRIOR_GRADES pseudo-observations. Coverage:
tests/test_confseq_coverage.py; widths: bench/calibrate_coverage.py (part sequence)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
ALPHA = 0.05
T_STAR = 300  # the boundary is tightest at this many grades
MIN_LAMBDA_GRADES = 10  # lambda is 0 (human-only terms) before this many grades
PRIOR_VARIANCE = 0.25  # the largest variance of a 0/1 value ...
PRIOR_GRADES = 20  # ... counted as this many pseudo-observations up to PRIOR_UNTIL grades,
PRIOR_UNTIL = 60  # then as PRIOR_GRADES * PRIOR_UNTIL / t
TARGET = 0.05
Z95 = 1.959963984540054


def _before(a: FloatArray) -> FloatArray:
    """Sums over the positions before each one along the last axis (0 at the first)."""
    c = np.cumsum(a, axis=-1)
    return np.concatenate([np.zeros_like(c[..., :1]), c[..., :-1]], axis=-1)


def predictable_fit(
    y: FloatArray, f: FloatArray, p: FloatArray, n_pop: int
) -> tuple[FloatArray, FloatArray]:
    """(c_t, lambda_t) from the grades before t: the regression of Y on f weighted so that it
    minimises the variance of e / p (slope clipped to [0, 1]); 0 before MIN_LAMBDA_GRADES."""
    left = n_pop - np.arange(y.shape[-1], dtype=np.float64)  # pairs not drawn before j
    v = 1.0 / (n_pop * p) / np.maximum(left * p, 1e-300)
    sv, sy, sf = _before(v), _before(v * y), _before(v * f)
    syf, sff = _before(v * y * f), _before(v * f * f)
    with np.errstate(invalid="ignore", divide="ignore"):
        my, mf = sy / sv, sf / sv
        cov, var = syf / sv - my * mf, sff / sv - mf * mf
        lam = np.clip(np.where(var > 1e-9, np.nan_to_num(cov / var), 0.0), 0.0, 1.0)
        c = np.nan_to_num(my - lam * mf)
    lam[..., :MIN_LAMBDA_GRADES] = 0.0
    c[..., :MIN_LAMBDA_GRADES] = 0.0
    return c, lam


def desraj_terms(
    y: FloatArray, f: FloatArray, p: FloatArray, f_total: float, n_pop: int
) -> FloatArray:
    """The z_t of the module docstring, along the last axis (the grading order)."""
    c, lam = predictable_fit(y, f, p, n_pop)
    before = np.arange(y.shape[-1], dtype=np.float64)  # grades before t
    past = _before(y) - lam * _before(f) - c * before
    z = (c * n_pop + lam * f_total + past + (y - c - lam * f) / p) / n_pop
    return np.asarray(z, dtype=np.float64)


def regression_fixed(
    y: FloatArray, f: FloatArray, p: FloatArray, f_total: float, n_pop: int
) -> tuple[FloatArray, FloatArray]:
    """The fixed-n estimate and its standard error along the last axis: Des Raj's terms with
    (c, lambda) fitted on all the grades by least squares (bias of order 1/n, as PPI++)."""
    t = y.shape[-1]
    j = np.arange(t, dtype=np.float64)
    a = (_before(y) + y / p) / n_pop
    b = (j + 1.0 / p - n_pop) / n_pop
    d = (_before(f) + f / p - f_total) / n_pop
    x = np.stack(np.broadcast_arrays(np.ones_like(a), b, d), axis=-1)
    gram = np.swapaxes(x, -1, -2) @ x
    coef = (np.linalg.pinv(gram) @ (np.swapaxes(x, -1, -2) @ a[..., None]))[..., 0]
    resid = a - (x @ coef[..., None])[..., 0]
    sse = np.sum(resid * resid, axis=-1)
    return coef[..., 0], np.sqrt(sse / max(t - 3, 1) / t)


def boundary(t: Any, alpha: float = ALPHA, t_star: float = T_STAR) -> Any:
    """The normal-mixture boundary per unit standard deviation after t terms."""
    r2 = (-2.0 * math.log(alpha) + math.log(-2.0 * math.log(alpha) + 1.0)) / t_star
    t = np.asarray(t, dtype=np.float64)
    return np.sqrt(2.0 * (t * r2 + 1.0) / (t * t * r2) * np.log(np.sqrt(t * r2 + 1.0) / alpha))


def running(z: FloatArray, variance_factor: float = 1.0) -> tuple[FloatArray, FloatArray]:
    """Running mean and running standard deviation (with the prior pseudo-observations)."""
    t = np.arange(1, z.shape[-1] + 1, dtype=np.float64)
    mean = np.cumsum(z, axis=-1) / t
    sq = np.cumsum(z * z, axis=-1) - t * mean * mean  # sum of squared deviations
    k = PRIOR_GRADES * np.minimum(1.0, PRIOR_UNTIL / t)
    var = (k * PRIOR_VARIANCE * variance_factor + np.maximum(sq, 0.0)) / (t + k)
    return mean, np.sqrt(var)


def fixed_error(se: float, t: int, variance_factor: float = 1.0) -> float:
    """The fixed-n standard error from `regression_fixed`'s, with the prior pseudo-observations
    of `running` fading as (PRIOR_UNTIL / t)^2 past PRIOR_UNTIL grades (as 1/t for the sequence):
    a guard for few grades that costs little at a fixed n of a few hundred."""
    k = PRIOR_GRADES * min(1.0, PRIOR_UNTIL / t) ** 2
    df = max(t - 3, 1)  # regression_fixed's residual degrees of freedom
    return math.sqrt((k * PRIOR_VARIANCE * variance_factor + se * se * t * df) / (df + k) / t)


def _grades_to(half: Any, t: int, target: float) -> int:
    """The least T >= t with half(T) <= target, minus t (half falls with T)."""
    if half(t) <= target:
        return 0
    lo, hi = t, max(2 * t, 2)
    while half(hi) > target:
        lo, hi = hi, hi * 2
        if hi > 1 << 40:  # never reached: the terms would have to stop varying
            return hi - t
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if half(mid) <= target else (mid, hi)
    return hi - t


def more_for(target: float, t: int, sd: float, alpha: float = ALPHA) -> int:
    """How many more grades (beyond t) likely bring the half-width to `target`, if the spread
    of the terms stays `sd`."""
    return _grades_to(lambda big: sd * float(boundary(big, alpha)), t, target) if sd > 0 else 0


def projected_sd(
    t_future: Any, t: int, ss: float, v_future: float, variance_factor: float = 1.0
) -> Any:
    """`running`'s standard deviation after t_future terms, if those still to come spread as
    `v_future`, the prior fading as `running` fades it."""
    big = np.asarray(t_future, dtype=np.float64)
    k = PRIOR_GRADES * np.minimum(1.0, PRIOR_UNTIL / big)
    total = k * PRIOR_VARIANCE * variance_factor + ss + np.maximum(big - t, 0.0) * v_future
    return np.sqrt(total / (big + k))


def projected_more(
    target: float,
    t: int,
    ss: float,
    v_future: float,
    variance_factor: float = 1.0,
    alpha: float = ALPHA,
) -> int:
    """How many more grades likely bring the half-width to `target` (bench/calibrate_coverage.py
    compares it with `more_for`)."""

    def half(big: int) -> float:
        sd = projected_sd(big, t, ss, v_future, variance_factor)
        return float(sd) * float(boundary(big, alpha))

    return _grades_to(half, t, target) if v_future > 0 else 0


@dataclass(frozen=True)
class Sequence:
    """The share's estimate and 95% confidence sequence after `n` grades in the sample's order."""

    n: int
    estimate: float
    cs: tuple[float, float]
    half_width: float
    fixed_ci: tuple[float, float]
    sd: float
    fixed_estimate: float | None = None  # the fixed-n estimate (None: `estimate`)
    ss: float | None = None  # the terms' squared deviations so far (no prior)
    v_future: float | None = None  # the variance of the terms since the fit started
    variance_factor: float = 1.0

    def more_for(self, target: float = TARGET) -> int:
        """How many more grades likely bring the half-width to `target` (`projected_more`;
        `more_for` on the current spread when the terms are not known)."""
        if self.ss is None or self.v_future is None:
            return more_for(target, self.n, self.sd)
        return projected_more(target, self.n, self.ss, self.v_future, self.variance_factor)


def share_sequence(
    y: npt.ArrayLike,
    f: npt.ArrayLike,
    p: npt.ArrayLike,
    f_all: npt.ArrayLike,
    variance_factor: float = 1.0,
) -> Sequence:
    """The sequence after the grades `y` (0/1, in the sample's order) with the LLM's `f` and draw
    probabilities `p` of those pairs, `f_all` the LLM's f of all N pairs (module docstring)."""
    yy, ff, pp = (np.asarray(a, dtype=np.float64) for a in (y, f, p))
    fa = np.asarray(f_all, dtype=np.float64)
    if yy.size == 0 or yy.shape != ff.shape or yy.shape != pp.shape:
        raise ValueError("a sequence needs at least one graded pair with y, f and p")
    if np.any(pp <= 0) or np.any(pp > 1):
        raise ValueError("draw probabilities must lie in (0, 1]")
    z = desraj_terms(yy, ff, pp, float(fa.sum()), fa.size)
    mean, sd = running(z, variance_factor)
    t = yy.size
    est, s = float(mean[-1]), float(sd[-1])
    half = s * float(boundary(t))
    fixed_est, fixed_se = est, s / math.sqrt(t)
    if t >= MIN_LAMBDA_GRADES:
        reg, se = regression_fixed(yy, ff, pp, float(fa.sum()), fa.size)
        fixed_est, fixed_se = float(reg), fixed_error(float(se), t, variance_factor)
    fixed = Z95 * fixed_se
    fitted = z[MIN_LAMBDA_GRADES:] if t >= 2 * MIN_LAMBDA_GRADES else z
    return Sequence(
        n=t,
        estimate=est,
        cs=(max(0.0, est - half), min(1.0, est + half)),
        half_width=half,
        fixed_ci=(max(0.0, fixed_est - fixed), min(1.0, fixed_est + fixed)),
        sd=s,
        fixed_estimate=fixed_est,
        ss=float(np.sum((z - z.mean()) ** 2)),
        v_future=float(np.var(fitted, ddof=1)) if fitted.size > 1 else PRIOR_VARIANCE,
        variance_factor=variance_factor,
    )
