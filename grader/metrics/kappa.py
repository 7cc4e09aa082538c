"""Cohen's kappa, the one implementation: 1 - sum(W*C) / sum(W*E), E the table expected by
chance, W the disagreement weight (none, linear or quadratic, as scikit-learn's
`cohen_kappa_score`); NaN when undefined. Stacks [..., k, k] make a bootstrap one pass."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def confusion_matrix(
    a: npt.ArrayLike, b: npt.ArrayLike, size: int, weights: npt.ArrayLike | None = None
) -> FloatArray:
    """C[a, b] (size x size): the (weighted) count of items graded a by one rater, b by another."""
    x = np.asarray(a, dtype=np.int64)
    if x.shape != np.shape(b):
        raise ValueError("human and llm grades must have the same length")
    return grouped_confusion(np.zeros_like(x), 1, x, b, size, weights).reshape(size, size)


def grouped_confusion(
    groups: npt.ArrayLike,
    n_groups: int,
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    size: int,
    weights: npt.ArrayLike | None = None,
) -> FloatArray:
    """One confusion matrix per group (`groups`: each item's index in 0..n_groups-1)."""
    g, x, y = (np.asarray(v, dtype=np.int64) for v in (groups, a, b))
    if any(v.size and (v.min() < 0 or v.max() >= size) for v in (x, y)):
        raise ValueError(f"grades must lie in 0..{size - 1}")
    w = check_weights(weights, x.shape[0])
    flat = np.bincount(g * size * size + x * size + y, weights=w, minlength=n_groups * size * size)
    return flat.reshape(n_groups, size, size).astype(np.float64)


def check_weights(weights: npt.ArrayLike | None, n: int) -> FloatArray | None:
    """The weights as floats, one per item, finite and non-negative (None stays None)."""
    if weights is None:
        return None
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (n,):
        raise ValueError(f"weights must hold one value per pair ({n}), got shape {w.shape}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError("weights must be finite and non-negative")
    return w


def ratio(num: npt.ArrayLike, den: npt.ArrayLike) -> FloatArray:
    """num / den elementwise, NaN where den is not positive."""
    n, d = np.broadcast_arrays(np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64))
    out: FloatArray = np.divide(n, d, out=np.full(n.shape, np.nan), where=d > 0)
    return out


def disagreement_weights(weighting: str, size: int) -> FloatArray:
    """W[a, b] for a weighting: none (a != b), linear |a - b| or quadratic (a - b)^2."""
    i = np.arange(size, dtype=np.float64)
    d = np.abs(i[:, None] - i[None, :])
    by_name = {"none": np.asarray(d > 0, dtype=np.float64), "linear": d, "quadratic": d**2}
    if weighting not in by_name:
        raise ValueError(f"unknown kappa weighting {weighting!r} (none, linear, quadratic)")
    return by_name[weighting]


def kappa(c: npt.ArrayLike, weighting: str = "none") -> FloatArray:
    """Cohen's kappa of confusion matrices [..., k, k] (the module's formula); NaN if undefined."""
    m = np.asarray(c, dtype=np.float64)
    w = disagreement_weights(weighting, m.shape[-1])
    total = m.sum(axis=(-2, -1))
    rows = m.sum(axis=-1)
    cols = m.sum(axis=-2)
    expected = ratio(rows[..., :, None] * cols[..., None, :], total[..., None, None])
    observed = (w * m).sum(axis=(-2, -1))
    chance = (w * expected).sum(axis=(-2, -1))
    return np.asarray(1.0 - ratio(observed, chance), dtype=np.float64)


def cohen_kappa(
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    size: int,
    weights: npt.ArrayLike | None = None,
    weighting: str = "none",
) -> float:
    """Cohen's kappa of two grade vectors on the scale 0..size-1; NaN if undefined."""
    return float(kappa(confusion_matrix(a, b, size, weights), weighting))
