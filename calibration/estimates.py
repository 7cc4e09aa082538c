"""Prediction-powered estimates (PPI++) of a mean from a few human labels and many LLM labels.

PPI++ (Angelopoulos, Duchi and Zrnic, "PPI++: Efficient Prediction-Powered Inference", 2023) for
a mean: with n labelled units (human value Y_i, LLM value f_i) and N unlabelled units (LLM value
only, f~_j),

    theta_lambda = mean(Y_i - lambda * f_i) + lambda * mean(f~_j)
    var          = var(Y - lambda * f) / n + lambda^2 * var(f~) / N

and lambda is tuned to minimise the variance, lambda = cov(Y, f) / ((1 + n / N) var(f)), clipped
to [0, 1] (0 is the classical human-only mean; 1 is plain PPI). The 95% interval is the CLT one,
theta +- z_0.975 * sqrt(var) with the tuned lambda. The estimate is unbiased whatever the LLM's
errors, and never much wider than the human-only interval; the better the LLM, the narrower.

Variances of means are the linearised (sandwich) ones, var(mean) = G/(G-1) * sum_c (sum_{i in c}
p_i (x_i - mean))^2 over clusters c, which is s^2/n for equal weights and one unit per cluster.
`groups` make the units of one cluster (e.g. the pairs of one query, which people grade together
and which share the query's difficulty) count as one draw, so the interval does not pretend that
pairs are independent.

It assumes the labelled units (or clusters) are a uniform random sample. When a sampling manifest
gives inclusion probabilities (`weights` w = 1/pi), the labelled part becomes the Hajek-weighted
mean and the unlabelled part the mean of f over ALL units (the population, known exactly): the
difference estimator theta = lambda * mean_all(f) + sum w (Y - lambda f) / sum w, lambda tuned
as the weighted regression slope, variance linearised as above (sampling with replacement).

`relevant_share` is a per-pair estimand (share of pairs with grade >= threshold; labelled unit:
a pair graded by both, clustered by query). Per-run mean measures are per-query estimands; the
labelled unit is a query whose LLM-graded pairs were ALL graded by people, because a per-query
measure such as nDCG needs every judged grade of the query (its ideal ranking).
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from calibration.agreement import to_float

LEVEL = 0.95
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class MeanEstimate:
    """LLM-only, human-only and PPI++ estimates of one mean, with the PPI++ interval."""

    llm_only: float
    human_only: float
    ppi: float
    ppi_ci: tuple[float, float]
    human_ci: tuple[float, float]
    lam: float
    n_labelled: int
    n_unlabelled: int
    weighted: bool = False
    clusters: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON object DESIGN.md fixes (llm_only, human_only, ppi, ppi_ci) and a few more."""
        return {
            "llm_only": to_float(self.llm_only),
            "human_only": to_float(self.human_only),
            "ppi": to_float(self.ppi),
            "ppi_ci": [to_float(self.ppi_ci[0]), to_float(self.ppi_ci[1])],
            "human_only_ci": [to_float(self.human_ci[0]), to_float(self.human_ci[1])],
            "lambda": to_float(self.lam),
            "n_labelled": self.n_labelled,
            "n_unlabelled": self.n_unlabelled,
            "labelled_clusters": self.clusters,
            "weighted": self.weighted,
        }


def _z(level: float) -> float:
    return NormalDist().inv_cdf(0.5 + level / 2.0)


def mean_and_variance(
    x: FloatArray, p: FloatArray, groups: npt.ArrayLike | None = None
) -> tuple[float, float]:
    """The p-weighted mean of x (p sums to 1) and the linearised variance of that mean.

    With `groups`, units of one group are one cluster (cluster-robust); NaN with < 2 clusters.
    """
    mean = float(np.sum(p * x))
    per_unit = p * (x - mean)
    if groups is None:
        contrib = per_unit
    else:
        codes, _ = pd.factorize(np.asarray(groups), sort=False)
        contrib = np.bincount(codes, weights=per_unit).astype(np.float64)
    g = contrib.size
    if g < 2:
        return mean, float("nan")
    return mean, float(np.sum(contrib**2)) * g / (g - 1)


def _uniform(n: int) -> FloatArray:
    return np.full(n, 1.0 / n) if n else np.zeros(0)


def _interval(
    centre: float, variance: float, z: float, bounds: tuple[float, float] | None = None
) -> tuple[float, float]:
    """The CLT interval, intersected with `bounds` (the estimand's range, e.g. [0, 1] for a share
    or an nDCG): the true value lies inside them, so clipping never costs coverage."""
    half = z * float(np.sqrt(variance)) if np.isfinite(variance) else float("nan")
    low, high = centre - half, centre + half
    if bounds is not None and np.isfinite(half):
        low, high = max(low, bounds[0]), min(high, bounds[1])
    return low, high


def ppi_mean(
    y: npt.ArrayLike,
    f: npt.ArrayLike,
    f_unlabelled: npt.ArrayLike,
    *,
    weights: npt.ArrayLike | None = None,
    groups: npt.ArrayLike | None = None,
    groups_unlabelled: npt.ArrayLike | None = None,
    lam: float | None = None,
    level: float = LEVEL,
    bounds: tuple[float, float] | None = None,
) -> MeanEstimate:
    """PPI++ estimate of E[Y] from labelled (y, f) and unlabelled f (see the module docstring).

    `weights` (one per labelled unit, 1/inclusion probability) switch to the weighted difference
    estimator; `groups` / `groups_unlabelled` cluster units for the variance; `lam` fixes lambda
    instead of tuning it; `bounds` (the estimand's range) clip the intervals, not the estimate.
    Raises ValueError when there is no labelled unit.
    """
    yl = np.asarray(y, dtype=np.float64)
    fl = np.asarray(f, dtype=np.float64)
    fu = np.asarray(f_unlabelled, dtype=np.float64)
    n, big_n = yl.size, fu.size
    if n == 0 or fl.size != n:
        raise ValueError("PPI needs at least one labelled unit with both values")
    z = _z(level)
    weighted = weights is not None
    if weighted:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != yl.shape or np.any(w < 0) or w.sum() <= 0:
            raise ValueError("weights must be one non-negative value per labelled unit, not all 0")
        p = w / w.sum()
    else:
        p = _uniform(n)
    clusters = None if groups is None else int(pd.unique(np.asarray(groups)).size)
    human, human_var = mean_and_variance(yl, p, groups)
    human_ci = _interval(human, human_var, z, bounds)
    f_all = np.concatenate([fl, fu])
    llm_only = float(f_all.mean())
    if big_n == 0:
        return MeanEstimate(
            llm_only, human, human, human_ci, human_ci, 0.0, n, 0, weighted, clusters
        )
    if lam is None:
        lam = _tuned_lambda(yl, fl, f_all, p, n, big_n, weighted)
    if weighted:
        # the population's f mean is known exactly: only the labelled part varies
        centre, var_lab = mean_and_variance(yl - lam * fl, p, groups)
        est = lam * llm_only + centre
        variance = var_lab
    else:
        centre, var_lab = mean_and_variance(yl - lam * fl, p, groups)
        f_mean, var_unl = mean_and_variance(fu, _uniform(big_n), groups_unlabelled)
        est = centre + lam * f_mean
        variance = var_lab + lam**2 * (0.0 if np.isnan(var_unl) else var_unl)
    return MeanEstimate(
        llm_only,
        human,
        est,
        _interval(est, variance, z, bounds),
        human_ci,
        lam,
        n,
        big_n,
        weighted,
        clusters,
    )


def _tuned_lambda(
    yl: FloatArray,
    fl: FloatArray,
    f_all: FloatArray,
    p: FloatArray,
    n: int,
    big_n: int,
    weighted: bool,
) -> float:
    my, mf = float(np.sum(p * yl)), float(np.sum(p * fl))
    cov = float(np.sum(p * (yl - my) * (fl - mf)))
    if weighted:
        var_f = float(np.sum(p * (fl - mf) ** 2))
        shrink = 1.0
    else:
        var_f = float(np.var(f_all))
        shrink = 1.0 + n / big_n
    if not var_f > 0 or not np.isfinite(cov):
        return 0.0
    return float(np.clip(cov / (shrink * var_f), 0.0, 1.0))
