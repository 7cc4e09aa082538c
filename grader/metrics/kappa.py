"""Cohen's kappa: the one implementation, on (stacks of) confusion matrices.

C[a, b] is the (weighted) number of items the first rater graded a and the second b. Kappa is
1 - sum(W*C) / sum(W*E), where E is the table expected by chance (outer product of the margins
over the total) and W the disagreement weight: (a != b) unweighted, |a - b| linear, (a - b)^2
quadratic. Unweighted, this is the classic (p_o - p_e) / (1 - p_e). Weights are grade distances on
the fixed scale 0..size-1, which equals scikit-learn's `cohen_kappa_score` with
`labels=range(size)`. A kappa that is undefined (no items, or both raters use one and the same
grade, so chance agreement is 1) is NaN.

Everything takes a stack of matrices (shape [..., k, k]) so a bootstrap or a threshold search
computes many kappas in one vectorised pass. Pure numpy: the grade scale's size is passed in by the
caller (`len(grader.models.GRADES)`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def confusion_matrix(
    a: npt.ArrayLike, b: npt.ArrayLike, size: int, weights: npt.ArrayLike | None = None
) -> FloatArray:
    """The size x size matrix C[a, b]: (weighted) count of items graded a by one rater, b by the
    other."""
    x = np.asarray(a, dtype=np.int64)
    y = np.asarray(b, dtype=np.int64)
    if x.shape != y.shape:
        raise ValueError("human and llm grades must have the same length")
    check_grades(x, size)
    check_grades(y, size)
    w = check_weights(weights, x.shape[0])
    flat = np.bincount(x * size + y, weights=w, minlength=size * size)
    return flat.reshape(size, size).astype(np.float64)


def grouped_confusion(
    groups: npt.ArrayLike,
    n_groups: int,
    a: npt.ArrayLike,
    b: npt.ArrayLike,
    size: int,
    weights: npt.ArrayLike | None = None,
) -> FloatArray:
    """One confusion matrix per group (e.g. per query): shape [n_groups, size, size].

    `groups` holds each item's group index in 0..n_groups-1.
    """
    g = np.asarray(groups, dtype=np.int64)
    x = np.asarray(a, dtype=np.int64)
    y = np.asarray(b, dtype=np.int64)
    check_grades(x, size)
    check_grades(y, size)
    w = check_weights(weights, x.shape[0])
    flat = np.bincount(g * size * size + x * size + y, weights=w, minlength=n_groups * size * size)
    return flat.reshape(n_groups, size, size).astype(np.float64)


def check_grades(values: npt.NDArray[np.int64], size: int) -> None:
    """Raise ValueError unless every grade lies in 0..size-1."""
    if values.size and (values.min() < 0 or values.max() >= size):
        raise ValueError(f"grades must lie in 0..{size - 1}")


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
    n = np.asarray(num, dtype=np.float64)
    d = np.asarray(den, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(d > 0, n / np.where(d > 0, d, 1.0), np.nan)
    return np.asarray(out, dtype=np.float64)


def disagreement_weights(weighting: str, size: int) -> FloatArray:
    """W[a, b] for a weighting: none (a != b), linear |a - b| or quadratic (a - b)^2."""
    i = np.arange(size, dtype=np.float64)
    d = i[:, None] - i[None, :]
    if weighting == "none":
        return np.asarray(d != 0, dtype=np.float64)
    if weighting == "linear":
        return np.asarray(np.abs(d), dtype=np.float64)
    if weighting == "quadratic":
        return np.asarray(d**2, dtype=np.float64)
    raise ValueError(f"unknown kappa weighting {weighting!r} (none, linear, quadratic)")


def kappa(c: npt.ArrayLike, weighting: str = "none") -> FloatArray:
    """Cohen's kappa of confusion matrices [..., k, k]: 1 - sum(W*C) / sum(W*E); NaN if
    undefined."""
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
