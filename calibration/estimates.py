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

It assumes the labelled units are a uniform random sample of all units. When a sampling manifest
gives inclusion probabilities (weights w = 1/pi), the labelled part becomes the Hajek-weighted
mean and the unlabelled part the mean of f over ALL units (the population, known exactly): the
classical difference estimator, theta = lambda * mean_all(f) + sum w (Y - lambda f) / sum w, with
variance var_w(Y - lambda f) / n_eff (Kish's effective n = (sum w)^2 / sum w^2), an approximation
that treats the sample as drawn with replacement.

`relevant_share` is a per-pair estimand (share of pairs with grade >= threshold; labelled unit:
a pair graded by both). Per-run mean measures are per-query estimands; the labelled unit is a
query whose LLM-graded pairs were ALL graded by people, because a per-query measure such as nDCG
needs every judged grade of the query (its ideal ranking) and cannot be computed from part of it.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

from calibration.agreement import to_float

LEVEL = 0.95


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
            "weighted": self.weighted,
        }


def _z(level: float) -> float:
    return NormalDist().inv_cdf(0.5 + level / 2.0)


def _var(x: npt.NDArray[np.float64]) -> float:
    return float(np.var(x, ddof=1)) if x.size > 1 else float("nan")


def ppi_mean(
    y: npt.ArrayLike,
    f: npt.ArrayLike,
    f_unlabelled: npt.ArrayLike,
    *,
    weights: npt.ArrayLike | None = None,
    lam: float | None = None,
    level: float = LEVEL,
) -> MeanEstimate:
    """PPI++ estimate of E[Y] from labelled (y, f) and unlabelled f (see the module docstring).

    `weights` (one per labelled unit, 1/inclusion probability) switch to the weighted difference
    estimator; `lam` fixes lambda instead of tuning it. Raises ValueError with no labelled unit.
    """
    yl = np.asarray(y, dtype=np.float64)
    fl = np.asarray(f, dtype=np.float64)
    fu = np.asarray(f_unlabelled, dtype=np.float64)
    n, big_n = yl.size, fu.size
    if n == 0 or fl.size != n:
        raise ValueError("PPI needs at least one labelled unit with both values")
    z = _z(level)
    if weights is not None:
        return _weighted(yl, fl, fu, np.asarray(weights, dtype=np.float64), lam, z)
    human = float(yl.mean())
    h_half = z * np.sqrt(_var(yl) / n)
    f_all = np.concatenate([fl, fu])
    llm_only = float(f_all.mean())
    if big_n == 0:
        return MeanEstimate(
            llm_only,
            human,
            human,
            (human - h_half, human + h_half),
            (human - h_half, human + h_half),
            0.0,
            n,
            0,
        )
    if lam is None:
        var_f = _var(f_all)
        cov = float(np.cov(yl, fl, ddof=1)[0, 1]) if n > 1 else float("nan")
        lam = cov / ((1.0 + n / big_n) * var_f) if var_f > 0 and np.isfinite(cov) else 0.0
        lam = float(np.clip(lam, 0.0, 1.0))
    est = float(np.mean(yl - lam * fl) + lam * fu.mean())
    var_u = _var(fu) if big_n > 1 else 0.0
    variance = _var(yl - lam * fl) / n + lam**2 * var_u / big_n
    half = z * float(np.sqrt(variance))
    return MeanEstimate(
        llm_only,
        human,
        est,
        (est - half, est + half),
        (human - h_half, human + h_half),
        lam,
        n,
        big_n,
    )


def _weighted(
    yl: npt.NDArray[np.float64],
    fl: npt.NDArray[np.float64],
    fu: npt.NDArray[np.float64],
    w: npt.NDArray[np.float64],
    lam: float | None,
    z: float,
) -> MeanEstimate:
    if w.shape != yl.shape or np.any(w < 0) or w.sum() <= 0:
        raise ValueError("weights must be one non-negative value per labelled unit, not all 0")
    p = w / w.sum()
    n_eff = 1.0 / float(np.sum(p * p))
    f_pop = float(np.concatenate([fl, fu]).mean())

    def wvar(x: npt.NDArray[np.float64]) -> float:
        mu = float(np.sum(p * x))
        return float(np.sum(p * (x - mu) ** 2)) * n_eff / max(n_eff - 1.0, 1.0)

    human = float(np.sum(p * yl))
    h_half = z * np.sqrt(wvar(yl) / n_eff)
    if lam is None:
        vf = wvar(fl)
        mf, my = float(np.sum(p * fl)), float(np.sum(p * yl))
        cov = float(np.sum(p * (fl - mf) * (yl - my))) * n_eff / max(n_eff - 1.0, 1.0)
        lam = float(np.clip(cov / vf, 0.0, 1.0)) if vf > 0 else 0.0
    if fu.size == 0:
        lam = 0.0
    est = lam * f_pop + float(np.sum(p * (yl - lam * fl)))
    half = z * float(np.sqrt(wvar(yl - lam * fl) / n_eff))
    return MeanEstimate(
        f_pop,
        human,
        est,
        (est - half, est + half),
        (human - h_half, human + h_half),
        lam,
        yl.size,
        fu.size,
        weighted=True,
    )
