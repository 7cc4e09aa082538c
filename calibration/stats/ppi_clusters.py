"""The relevant share from a few whole queries: each query's lambda is fitted on the others
(cross-fitting), the variance is the delete-one-query jackknife scaled up by Isaki's ratio (JASA
1983), the interval logit-scale t (docs/spot-checks-that-stop.md)."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from grader.evaluation.significance import t_quantile

FloatArray = npt.NDArray[np.float64]


def _estimate(
    totals: tuple[FloatArray, FloatArray, FloatArray, FloatArray],
    f_total: float,
    var_f: float,
    n_pop: int,
) -> tuple[float, float]:
    """The cross-fitted estimate from per-query totals (y, f, y*f, size) and its mean lambda."""
    y, f, yf, n = totals
    m = y.size
    lams = np.zeros(m)
    for k in range(m):
        other = np.arange(m) != k
        size = n[other].sum()
        if size <= 0 or not var_f > 0:
            continue
        my, mf = y[other].sum() / size, f[other].sum() / size
        lams[k] = np.clip((yf[other].sum() / size - my * mf) / var_f, 0.0, 1.0)
    est = lams.mean() * f_total / n_pop + float(np.sum(y - lams * f) / n.sum())
    return float(est), float(lams.mean())


def isaki_factor(f_q: FloatArray, n_q: FloatArray, f_pop: FloatArray, n_pop: FloatArray) -> float:
    """max(1, S2 / s2): the spread of the LLM's residuals f - n * share over all queries (sizes
    `n_pop`, LLM totals `f_pop`) against that over the drawn ones (`f_q`, `n_q`)."""
    share = float(f_pop.sum() / n_pop.sum())
    big = float(np.var(f_pop - share * n_pop, ddof=1))
    small = float(np.var(f_q - share * n_q, ddof=1))
    if small > 0:
        return max(1.0, big / small)
    return 1.0 if big == 0 else math.inf


def logit_interval(est: float, var: float, quantile: float) -> tuple[float, float]:
    """est +- quantile * sd on the logit scale (delta method), mapped back into [0, 1]; on the
    plain scale, clipped, when est is 0 or 1."""
    half = quantile * math.sqrt(var)
    if not 0.0 < est < 1.0 or math.isinf(half):
        return max(0.0, est - half), min(1.0, est + half)
    centre, spread = math.log(est / (1.0 - est)), half / (est * (1.0 - est))
    return 1.0 / (1.0 + math.exp(spread - centre)), 1.0 / (1.0 + math.exp(-centre - spread))


def _per_query(groups: npt.ArrayLike, *weights: FloatArray) -> list[FloatArray]:
    """Per-group totals of each of `weights`, groups in sorted order."""
    _, codes = np.unique(np.asarray(groups), return_inverse=True)
    return [np.asarray(np.bincount(codes, weights=w), dtype=np.float64) for w in weights]


def crossfit_cluster_share(
    y: npt.ArrayLike,
    f: npt.ArrayLike,
    groups: npt.ArrayLike,
    f_all: npt.ArrayLike,
    groups_all: npt.ArrayLike,
    level: float = 0.95,
) -> tuple[float, tuple[float, float], float]:
    """(estimate, interval in [0, 1], mean lambda) of the share of Y from whole drawn queries:
    labelled 0/1 `y`, `f` with their query `groups`, and the LLM's 0/1 of all N pairs (`f_all`)
    with their queries (`groups_all`). NaN interval with fewer than 3 queries."""
    yl, fl = np.asarray(y, dtype=np.float64), np.asarray(f, dtype=np.float64)
    fa = np.asarray(f_all, dtype=np.float64)
    per = _per_query(groups, yl, fl, yl * fl, np.ones_like(yl))
    y_q, f_q, yf_q, n_q = per
    var_f = float(np.var(fa, ddof=1)) if fa.size > 1 else 0.0
    est, lam = _estimate((y_q, f_q, yf_q, n_q), float(fa.sum()), var_f, fa.size)
    f_pop, n_pop = _per_query(groups_all, fa, np.ones_like(fa))
    m = y_q.size
    if m < 3:
        return est, (float("nan"), float("nan")), lam
    loo = np.empty(m)
    for k in range(m):
        other = np.arange(m) != k
        rest = (y_q[other], f_q[other], yf_q[other], n_q[other])
        loo[k] = _estimate(rest, float(fa.sum()), var_f, fa.size)[0]
    var = (1 - m / n_pop.size) * (m - 1) / m * float(np.sum((loo - loo.mean()) ** 2))
    var *= isaki_factor(f_q, n_q, f_pop, n_pop)
    return est, logit_interval(est, var, t_quantile(level, m - 1)), lam
