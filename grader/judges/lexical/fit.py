"""Fitting the lexical judge's three thresholds on human grades.

Maximises quadratic-weighted kappa, ties broken by exact agreement then the lowest thresholds
(deterministic); candidates are midpoints between distinct scores, at most `max_candidates`.
"""

from __future__ import annotations

import numpy as np

from grader.errors import InputError
from grader.metrics.kappa import kappa as cohen_kappa
from grader.models import GRADES, MAX_GRADE, MIN_GRADE

_UNDEFINED = -10.0  # below any kappa: an undefined kappa never wins over a defined one


def _candidates(scores: np.ndarray, max_candidates: int) -> np.ndarray:
    unique = np.unique(scores)
    mids = (unique[1:] + unique[:-1]) / 2.0
    if mids.size > max_candidates - 2:
        pick = np.linspace(0, mids.size - 1, max_candidates - 2).round().astype(np.int64)
        mids = mids[np.unique(pick)]
    top = 1.0 if unique[-1] < 1.0 else float(np.nextafter(unique[-1], np.inf))
    return np.concatenate(([unique[0]], mids, [top]))


def fit_lexical_thresholds(
    scores: np.ndarray, grades: np.ndarray, *, max_candidates: int = 120
) -> tuple[float, float, float]:
    """Thresholds t1 <= t2 <= t3 maximising quadratic-weighted kappa against `grades` (0..3)."""
    s = np.asarray(scores, dtype=np.float64).ravel()
    g = np.asarray(grades).ravel()
    if s.size != g.size:
        raise InputError(f"{s.size} scores but {g.size} grades; they must pair up")
    if s.size == 0:
        raise InputError("no graded pairs to fit thresholds on")
    if not np.isfinite(s).all():
        raise InputError(
            "a score is NaN or infinite", hint="drop pairs whose query has no terms (NaN score)"
        )
    if not np.issubdtype(g.dtype, np.integer) and not np.all(np.equal(np.mod(g, 1), 0)):
        raise InputError(f"grades must be integers {MIN_GRADE}..{MAX_GRADE}")
    if g.min() < MIN_GRADE or g.max() > MAX_GRADE:
        raise InputError(f"grades must lie in {MIN_GRADE}..{MAX_GRADE}")
    g = g.astype(np.int64)
    cuts = _candidates(s, max_candidates)
    # below[c, h]: how many pairs with human grade h score below cut c.
    order = np.argsort(s, kind="stable")
    s_sorted, g_sorted = s[order], g[order]
    positions = np.searchsorted(s_sorted, cuts, side="left")
    onehot = np.zeros((s.size + 1, len(GRADES)))
    onehot[1:][np.arange(s.size), g_sorted] = 1.0
    below = np.cumsum(onehot, axis=0)[positions]  # (m, 4)
    total = onehot.sum(axis=0)
    n = float(s.size)
    m = cuts.size
    single_grade = np.unique(g).size == 1
    best_key = (-np.inf, -np.inf)  # replaced by the first candidate
    best = (0, 0, 0)
    jj, kk = np.triu_indices(m)
    for i in range(m):
        keep = jj >= i
        j, k = jj[keep], kk[keep]
        cols = np.stack(
            [
                np.broadcast_to(below[i], (j.size, len(GRADES))),
                below[j] - below[i],
                below[k] - below[j],
                total - below[k],
            ],
            axis=2,
        )  # (pairs, human h, predicted p)
        kappa = np.nan_to_num(cohen_kappa(cols, "quadratic"), nan=_UNDEFINED)
        exact = np.einsum("xhh->x", cols) / n
        if single_grade:
            kappa = np.zeros_like(exact)  # kappa means nothing here: exact agreement decides
        top = kappa.max()
        near = np.flatnonzero(kappa >= top - 1e-12)
        pick = near[np.argmax(exact[near])]
        key = (float(kappa[pick]), float(exact[pick]))
        if key[0] > best_key[0] + 1e-12 or (
            abs(key[0] - best_key[0]) <= 1e-12 and key[1] > best_key[1] + 1e-12
        ):
            best_key, best = key, (i, int(j[pick]), int(k[pick]))
    return float(cuts[best[0]]), float(cuts[best[1]]), float(cuts[best[2]])


def grades_for(scores: np.ndarray, thresholds: tuple[float, float, float]) -> np.ndarray:
    """The grades the thresholds give to `scores` (how many thresholds each score reaches)."""
    s = np.asarray(scores, dtype=np.float64)
    out: np.ndarray = (s[..., None] >= np.asarray(thresholds)).sum(axis=-1).astype(np.int64)
    return out
