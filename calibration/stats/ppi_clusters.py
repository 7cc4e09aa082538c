"""The share of relevant pairs from a few whole queries: cross-fitted PPI with a jackknife interval.

With m whole queries drawn at random out of Q, PPI++ with lambda fitted on the same queries and
a Hajek ratio is biased downward when m is small (lambda and the ratio both follow the queries
drawn; about -0.01 to -0.02 at 6 queries on TREC DL 2019). Here each drawn query q gets
lambda_{-q}, the slope of human on LLM relevance over the OTHER drawn queries (pair level,
over var(f) of all pairs), so a query's own grades never tune its own correction:

    theta = mean_q(lambda_{-q}) F / N + sum_q (Y_q - lambda_{-q} F_q) / sum_q n_q

(F the LLM total over all N pairs; Y_q, F_q, n_q the human and LLM totals and the size of drawn
query q). The interval is the delete-one-query jackknife of that whole estimator (lambda refit
each time) with the finite-population factor 1 - m / Q and Student's t with m - 1 degrees of
freedom. The Horvitz-Thompson form (Q / m) sum_q Y_q / N is unbiased too but much wider when
queries differ in size; docs/spot-checks-that-stop.md gives both, measured.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from calibration.stats.student_t import t_quantile

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


def crossfit_cluster_share(
    y: npt.ArrayLike,
    f: npt.ArrayLike,
    groups: npt.ArrayLike,
    f_all: npt.ArrayLike,
    n_clusters: int,
    level: float = 0.95,
) -> tuple[float, tuple[float, float], float]:
    """(estimate, interval clipped to [0, 1], mean lambda) of the share of Y from whole drawn
    queries: labelled 0/1 `y`, `f` with their query `groups`, the LLM's 0/1 of all N pairs
    (`f_all`) and the number of queries Q they fall in. NaN interval with fewer than 3 queries."""
    yl, fl = np.asarray(y, dtype=np.float64), np.asarray(f, dtype=np.float64)
    fa = np.asarray(f_all, dtype=np.float64)
    _, codes = np.unique(np.asarray(groups), return_inverse=True)
    y_q, f_q, yf_q, n_q = (
        np.asarray(np.bincount(codes, weights=w), dtype=np.float64)
        for w in (yl, fl, yl * fl, np.ones_like(yl))
    )
    per = (y_q, f_q, yf_q, n_q)
    var_f = float(np.var(fa, ddof=1)) if fa.size > 1 else 0.0
    est, lam = _estimate(per, float(fa.sum()), var_f, fa.size)
    m = y_q.size
    if m < 3:
        return est, (float("nan"), float("nan")), lam
    loo = np.empty(m)
    for k in range(m):
        other = np.arange(m) != k
        rest = (y_q[other], f_q[other], yf_q[other], n_q[other])
        loo[k] = _estimate(rest, float(fa.sum()), var_f, fa.size)[0]
    var = (1 - m / n_clusters) * (m - 1) / m * float(np.sum((loo - loo.mean()) ** 2))
    half = t_quantile(level, m - 1) * float(np.sqrt(var))
    return est, (max(0.0, est - half), min(1.0, est + half)), lam
