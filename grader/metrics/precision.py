"""Precision at k (P@k): the share of the top k results that are relevant.

    P@k = |{ i <= k : rel_i >= threshold }| / k

Always divided by k (trec_eval's P_k): a short ranking is not rewarded for stopping early.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from grader.metrics._lists import Grades, check_k, hits, top
from grader.metrics.judged_rows import Ranked
from grader.metrics.measures import DEFAULT_THRESHOLD, Measure
from grader.metrics.registry import register


def precision_at_k(rels: Grades, k: int, threshold: int = DEFAULT_THRESHOLD) -> float:
    """P@k of one graded list."""
    check_k(k)
    return hits(top(rels, k), threshold) / k


def compute(measure: Measure, ranked: Ranked) -> npt.NDArray[np.float64]:
    """P@k per qrels query (vectorised)."""
    k = measure.cutoff
    if k is None:
        raise ValueError("P needs a cutoff")
    sel = (ranked.grade >= measure.threshold) & (ranked.rank <= k)
    return ranked.per_query(sel) / k


register(
    "P",
    compute,
    usage="P(rel=N)@k",
    help="relevant results in the top k / k (always divided by k)",
    cutoff="required",
    aliases=("precision",),
    judged_only=True,
    trec_eval="P",
    list_function=precision_at_k,
)
