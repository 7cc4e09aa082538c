"""Active sequential sampling: pairs drawn one at a time, the uncertain ones more often.

`relgrade sample --strategy active` orders pairs by successive sampling: the t-th pair is drawn
from those not drawn yet with probability p_t = w_i / (sum of w over the pairs left), so every
prefix of the order is itself a sample with known draw probabilities, and people may stop
grading after any number of pairs (`calibration.stats.confseq`). The draw is an exponential race
(Efraimidis and Spirakis 2006): pair i gets the key E_i / w_i with E_i ~ Exp(1); sorting the
keys gives the successive-sampling order.

The weights follow active statistical inference (Zrnic and Candes, ICML 2024): a pair's chance
grows as the square root of q, the expected squared error E[(Y - f)^2] of the LLM's prediction f
of relevance in the correction (`calibration.estimates_section`), so sqrt(q) is the residual's
conditional standard deviation:

- from the grade distribution (logprobs), where f = P(relevant) = r: q = r (1 - r);
- else f is the 0/1 relevance (grade >= threshold) and q the chance that the grade lies on the
  other side of the threshold: from an ensemble, the share of members on the other side from the
  majority (or, without member grades, the disagreement / 3);
- else from the grade's distance d to the threshold (d = 0.5 for grades 1 and 2 at threshold 2):
  q = 0.5 / (1 + 2 (d - 0.5)), so 0.5, 0.17, 0.1.

Then w = (1 - s) sqrt(q) / mean(sqrt(q)) + s, mixed with uniform by the share s
(`--uniform-share`, default UNIFORM_SHARE): each pair's weight is at least s times the mean
weight, so its chance to be drawn next is never below s times what a uniform draw would give it
(the floor on pi). Inclusion probabilities of a fixed-size prefix have no closed form under
successive sampling; the manifest records each pair's draw probability p_t (what the sequence
needs, exactly) and an inclusion probability from the Poisson approximation 1 - exp(-w tau)
(Rosen 1997), used only to weight the agreement figures.
"""

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
    """w = (1 - s) sqrt(q) / mean(sqrt(q)) + s; uniform when no pair is uncertain."""
    if not 0 < uniform_share <= 1:
        raise ValueError(f"the uniform share must be in (0, 1], got {uniform_share}")
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
