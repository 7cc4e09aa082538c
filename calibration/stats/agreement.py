"""Agreement between LLM and human grades, all from one (weighted) 4x4 confusion matrix, so 1/pi
weights weight every figure and the query bootstrap passes a stack of matrices in one call;
cross-checked against scikit-learn and krippendorff. Undefined figures are NaN (null in JSON).
Intervals resample QUERIES, not pairs: a query's pairs share its difficulty (seeded)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from calibration.join import pair_grades, pair_keys
from calibration.summary_model import HumanVsHuman
from grader.errors import InputError
from grader.metrics import kappa as _kappa
from grader.metrics.kappa import FloatArray, kappa
from grader.metrics.kappa import ratio as _ratio
from grader.models import GRADES

K = len(GRADES)
BINARY_THRESHOLDS: tuple[int, ...] = (1, 2, 3)


def binarise(c: FloatArray, threshold: int) -> FloatArray:
    """Collapse [..., 4, 4] to [..., 2, 2]: grade < threshold is 0, grade >= threshold is 1."""
    lo, hi = slice(0, threshold), slice(threshold, K)
    out = np.empty((*c.shape[:-2], 2, 2), dtype=np.float64)
    for a, ra in enumerate((lo, hi)):
        for b, rb in enumerate((lo, hi)):
            out[..., a, b] = c[..., ra, rb].sum(axis=(-2, -1))
    return out


def krippendorff_alpha(c: FloatArray, level: str = "ordinal") -> FloatArray:
    """Krippendorff's alpha for two coders with no missing values, from the coincidence matrix
    C + C^T (ordinal distance: Krippendorff 2011). NaN without expected disagreement."""
    c = np.asarray(c, dtype=np.float64)
    o = c + np.swapaxes(c, -1, -2)
    n_g = o.sum(axis=-1)
    n = n_g.sum(axis=-1)
    i = np.arange(K)
    if level == "interval":
        delta = np.broadcast_to((i[:, None] - i[None, :]).astype(np.float64) ** 2, o.shape)
    elif level == "ordinal":
        cum = np.cumsum(n_g, axis=-1)
        lo = np.minimum(i[:, None], i[None, :])
        hi = np.maximum(i[:, None], i[None, :])
        before_lo = np.where(lo > 0, cum[..., np.maximum(lo - 1, 0)], 0.0)
        between = cum[..., hi] - before_lo
        delta = (between - (n_g[..., lo] + n_g[..., hi]) / 2.0) ** 2
    else:
        raise ValueError(f"unknown alpha level {level!r} (ordinal, interval)")
    observed = (o * delta).sum(axis=(-2, -1))
    expected = (n_g[..., :, None] * n_g[..., None, :] * delta).sum(axis=(-2, -1))
    return np.asarray(1.0 - (n - 1.0) * _ratio(observed, expected), dtype=np.float64)


def scalar_figures(c: FloatArray) -> dict[str, FloatArray]:
    """Every scalar agreement figure of confusion matrices [..., 4, 4], keyed as in the JSON."""
    c = np.asarray(c, dtype=np.float64)
    total = c.sum(axis=(-2, -1))
    i = np.arange(K)
    dist = np.abs(i[:, None] - i[None, :])
    signed = (i[None, :] - i[:, None]).astype(np.float64)  # LLM minus human
    figures: dict[str, FloatArray] = {
        "n": total,
        "exact_agreement": _ratio((c * (dist == 0)).sum(axis=(-2, -1)), total),
        "within_one": _ratio((c * (dist <= 1)).sum(axis=(-2, -1)), total),
        "cohen_kappa": kappa(c, "none"),
        "weighted_kappa_linear": kappa(c, "linear"),
        "weighted_kappa_quadratic": kappa(c, "quadratic"),
        "krippendorff_alpha_ordinal": krippendorff_alpha(c, "ordinal"),
        "krippendorff_alpha_interval": krippendorff_alpha(c, "interval"),
        "mean_bias": _ratio((c * signed).sum(axis=(-2, -1)), total),
    }
    for t in BINARY_THRESHOLDS:
        figures[f"binary_kappa_{t}"] = kappa(binarise(c, t), "none")
    return figures


def per_grade(c: FloatArray) -> dict[str, dict[str, float | None]]:
    """Precision and recall of each LLM grade against the human one, with both supports."""
    llm_total, human_total = c.sum(axis=0), c.sum(axis=1)
    precision, recall = _ratio(np.diag(c), llm_total), _ratio(np.diag(c), human_total)
    return {
        str(g): {
            "precision": to_float(precision[g]),
            "recall": to_float(recall[g]),
            "human_count": float(human_total[g]),
            "llm_count": float(llm_total[g]),
        }
        for g in GRADES
    }


def to_float(value: Any) -> float | None:
    """A JSON-ready float: NaN becomes None."""
    v = float(value)
    return None if np.isnan(v) else v


def agreement(
    human: npt.ArrayLike, llm: npt.ArrayLike, weights: npt.ArrayLike | None = None
) -> dict[str, Any]:
    """All agreement figures of paired grades, as `calibrate --format json` prints them;
    `weights` weight every figure (`n` stays the pair count, `weighted_n` the total weight)."""
    h = np.asarray(human, dtype=np.int64)
    c = _kappa.confusion_matrix(h, llm, K, weights)
    figures = scalar_figures(c)
    out: dict[str, Any] = {"n": int(h.shape[0]), "weighted": weights is not None}
    if weights is not None:
        out["weighted_n"] = float(figures["n"])
    for key, value in figures.items():
        if key == "n" or key.startswith("binary_kappa_"):
            continue
        out[key] = to_float(value)
    out["binary_kappa"] = {
        str(t): to_float(figures[f"binary_kappa_{t}"]) for t in BINARY_THRESHOLDS
    }
    out["confusion"] = [[int(v) if v.is_integer() else float(v) for v in row] for row in c]
    out["per_grade"] = per_grade(c)
    return out


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


def human_vs_human(
    human: pd.DataFrame,
    second: pd.DataFrame,
    llm: pd.DataFrame,
    weights: Mapping[tuple[str, str], float] | None = None,
) -> HumanVsHuman:
    """Human-vs-human agreement (`second` against `human`) beside the LLM's against `human`, on
    the pairs all three graded, weighted alike by `weights` ((query_id, doc_id) -> 1/pi)."""
    humans = pair_grades(second, human).frame  # "llm" column holds the second person's grades
    llm_side = llm[["query_id", "doc_id", "grade"]].astype({"query_id": str, "doc_id": str})
    three = humans.merge(llm_side, on=["query_id", "doc_id"], how="inner")
    if three.empty:
        raise InputError(
            "no pair is graded by both people and the LLM",
            hint="the second person's file must cover the same sample as --human",
        )
    w: npt.NDArray[np.float64] | None = None
    if weights is not None:
        keys = pair_keys(three)
        w = np.array([weights.get(k, np.nan) for k in keys], dtype=np.float64)
        if np.isnan(w).any():
            q, d = keys[int(np.flatnonzero(np.isnan(w))[0])]
            raise InputError(
                f"pair ({q}, {d}) graded by both people has no weight",
                hint="weights must cover every pair graded by --human and the LLM",
            )
    first = three["human"].to_numpy(dtype=np.int64)
    between = agreement(first, three["llm"].to_numpy(dtype=np.int64), w)
    with_llm = agreement(first, three["grade"].to_numpy(dtype=np.int64), w)
    return HumanVsHuman.model_validate(  # PairFigures keeps the headline figures
        {
            "n": len(three),
            "second_only": int(len(second) - len(humans)),
            "weighted": w is not None,
            "humans": between,
            "llm": with_llm,
        }
    )
