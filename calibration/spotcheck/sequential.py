"""Active sequential sampling: successive sampling (Efraimidis and Spirakis 2006) makes every
prefix a sample with known draw probabilities; weights grow as sqrt(q), q the expected squared
error of the LLM's relevance prediction (Zrnic and Candes 2024), mixed with `--uniform-share`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from grader.models import Judgment

FloatArray = npt.NDArray[np.float64]
UNIFORM_SHARE = 0.5


def _other_side(judgment: Judgment, threshold: int) -> tuple[float | None, str]:
    """q of the module docstring, and where it came from (None: no distribution nor ensemble)."""
    if judgment.distribution is not None and len(judgment.distribution) == 4:
        rel = min(1.0, max(0.0, float(sum(judgment.distribution[threshold:]))))
        return rel * (1.0 - rel), "grade distribution"
    members = [g for g in (judgment.judges or {}).values() if g is not None]
    if len(members) > 1:
        rel = sum(g >= threshold for g in members) / len(members)
        return min(rel, 1.0 - rel), "ensemble disagreement"
    if judgment.disagreement is not None:
        return min(0.5, judgment.disagreement / 3.0), "ensemble disagreement"
    return None, "distance to the threshold"


def estimand_uncertainty(
    judgments: Sequence[Judgment], threshold: int
) -> tuple[FloatArray, str, int]:
    """q per pair (module docstring), the source used, and how many pairs fell back to the
    distance to the threshold although others had a distribution or an ensemble."""
    found = [_other_side(j, threshold) for j in judgments]
    out = np.empty(len(judgments), dtype=np.float64)
    fallback = 0
    for i, (j, (q, _)) in enumerate(zip(judgments, found, strict=True)):
        if q is None:
            d = abs(int(j.grade or 0) - (threshold - 0.5))
            q = 0.5 / (1.0 + 2.0 * (d - 0.5))
            fallback += 1
        out[i] = q
    sources = [s for q, s in found if q is not None]
    source = max(set(sources), key=sources.count) if sources else "distance to the threshold"
    return out, source, fallback if sources else 0


def active_weights(q: FloatArray, uniform_share: float = UNIFORM_SHARE) -> FloatArray:
    """w = (1 - s) sqrt(q) / mean(sqrt(q)) + s (s in (0, 1]); uniform when no pair is uncertain."""
    root = np.sqrt(np.clip(q, 0.0, None))
    if not root.mean() > 0:
        return np.ones_like(root)
    return np.asarray((1 - uniform_share) * root / root.mean() + uniform_share, dtype=np.float64)


def variance_factor(w: FloatArray) -> float:
    """mean(w) mean(1/w): how much unequal draw probabilities inflate a term's variance when
    the errors do not follow the weights (1 for a uniform design)."""
    return float(np.mean(w) * np.mean(1.0 / w))


def sequential_draw(
    w: FloatArray, n: int, rng: np.random.Generator
) -> tuple[npt.NDArray[np.int64], FloatArray]:
    """The first n pairs of a successive-sampling order, and each one's draw probability."""
    keys = rng.exponential(size=w.size) / w
    first = np.argpartition(keys, n - 1)[:n] if n < w.size else np.arange(w.size)
    order = first[np.argsort(keys[first], kind="stable")]
    drawn = w[order]
    left = w.sum() - np.concatenate([[0.0], np.cumsum(drawn)[:-1]])
    return order.astype(np.int64), np.minimum(drawn / left, 1.0)


def uniform_draw_probabilities(n: int, population: int) -> FloatArray:
    """Draw probabilities of the first n pairs of a uniform random order: 1 / (N - t + 1)."""
    return 1.0 / (population - np.arange(n, dtype=np.float64))


def inclusion_approx(w: FloatArray, n: int) -> FloatArray:
    """pi_i = 1 - exp(-w_i tau) with sum pi = n (Rosen's approximation for successive sampling)."""
    if n >= w.size:
        return np.ones_like(w)
    lo, hi = 0.0, 1.0
    while np.sum(1 - np.exp(-w * hi)) < n:
        hi *= 2
    for _ in range(100):
        mid = (lo + hi) / 2
        if np.sum(1 - np.exp(-w * mid)) < n:
            lo = mid
        else:
            hi = mid
    return np.asarray(np.clip(1 - np.exp(-w * hi), 1e-12, 1.0), dtype=np.float64)
