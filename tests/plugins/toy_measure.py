"""A toy measure, added as docs/adding-a-measure.md says: rank-biased precision.

    ToyRBP(rel=N,p=P)@k = (1 - p) * sum_{i <= k} p^(i-1) * [rel_i >= N]

- p: the user's persistence, 0 < p < 1 (default 0.8, Moffat and Zobel's).
- k: optional; without it the whole ranking. threshold: default from the qrels.
- Edge cases: an empty ranking or no relevant document scores 0; unjudged is not relevant.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from relgrade import DEFAULT_THRESHOLD, Measure, Ranked, register_measure


# Step 2: the list function (one graded list, None = unjudged).
def rbp(
    rels: Sequence[int | None],
    p: float = 0.8,
    k: int | None = None,
    threshold: int = DEFAULT_THRESHOLD,
) -> float:
    """RBP of one graded list."""
    shown = rels[:k] if k is not None else rels
    return (1 - p) * sum(p**i for i, g in enumerate(shown) if g is not None and g >= threshold)


# Step 3: the vectorised function (one value per qrels query).
def compute(measure: Measure, ranked: Ranked) -> npt.NDArray[np.float64]:
    """ToyRBP per qrels query."""
    p: float = measure.param("p")
    sel = ranked.relevant(measure.threshold, measure.cutoff)
    weights = np.asarray((1 - p) * np.power(p, ranked.rank - 1.0), dtype=np.float64)
    return ranked.per_query(sel, weights)


def persistence(text: str) -> float:
    """The parser of `p=`."""
    value = float(text)
    if not 0 < value < 1:
        raise ValueError("p is a probability strictly between 0 and 1")
    return value


# Step 4: one registration.
register_measure(
    "ToyRBP",
    compute,
    usage="ToyRBP(rel=N,p=P)[@k]",
    help="toy: rank-biased precision, persistence p (0.8)",
    params={"p": persistence},
    defaults={"p": 0.8},
    list_function=rbp,
)
