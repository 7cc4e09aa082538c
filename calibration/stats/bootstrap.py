"""95% bootstrap intervals that resample QUERIES, not pairs: a query's pairs share its difficulty,
so resampling pairs would give too narrow intervals. Every figure is computed for all resamples
at once from the stacked confusion matrices; seeded."""

from __future__ import annotations

import numpy as np

from calibration.stats.agreement import scalar_figures, to_float
from grader.metrics.kappa import FloatArray

DEFAULT_RESAMPLES = 1000
CHUNK = 200


def resampled_confusions(
    per_query: FloatArray, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> FloatArray:
    """[n_resamples, 4, 4]: the summed confusion matrices of query resamples."""
    q = per_query.shape[0]
    if q == 0 or n_resamples <= 0:
        return np.zeros((0, *per_query.shape[1:]), dtype=np.float64)
    rng = np.random.default_rng(seed)
    flat = per_query.reshape(q, -1)
    out = np.empty((n_resamples, flat.shape[1]), dtype=np.float64)
    for start in range(0, n_resamples, CHUNK):
        b = min(CHUNK, n_resamples - start)
        picks = rng.integers(0, q, size=(b, q))
        cells = (np.arange(b)[:, None] * q + picks).ravel()
        counts = np.bincount(cells, minlength=b * q).reshape(b, q).astype(np.float64)
        out[start : start + b] = counts @ flat
    return out.reshape(n_resamples, *per_query.shape[1:])


def percentile_interval(values: FloatArray, level: float = 0.95) -> list[float | None]:
    """[low, high] percentile interval, ignoring resamples where the figure is undefined."""
    finite = values[np.isfinite(values)]
    if finite.size == 0:
        return [None, None]
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.percentile(finite, [tail, 100.0 - tail])
    return [to_float(lo), to_float(hi)]


def agreement_intervals(
    per_query: FloatArray, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0
) -> dict[str, list[float | None]]:
    """{figure: [low, high]} for every scalar figure except n, resampling queries."""
    stacked = resampled_confusions(per_query, n_resamples, seed)
    if stacked.shape[0] == 0:
        return {}
    figures = scalar_figures(stacked)
    return {key: percentile_interval(vals) for key, vals in figures.items() if key != "n"}
