"""Recall at k (R@k): the share of the query's judged relevant documents found in the top k.

    R@k = |{ i <= k : rel_i >= threshold }| / n_relevant

n_relevant counts judged documents, never returned ones; without k, trec_eval's set_recall.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from grader.metrics._lists import Grades, hits, top
from grader.metrics.judged_rows import Ranked
from grader.metrics.measures import DEFAULT_THRESHOLD, Measure
from grader.metrics.registry import register


def recall_at_k(
    rels: Grades, k: int | None, n_relevant: int, threshold: int = DEFAULT_THRESHOLD
) -> float:
    """R@k of one graded list, given the query's number of relevant judged documents."""
    found = hits(top(rels, k), threshold)
    if n_relevant < found:
        raise ValueError(f"n_relevant={n_relevant} is less than the {found} relevant found")
    return found / n_relevant if n_relevant else 0.0


def compute(measure: Measure, ranked: Ranked) -> npt.NDArray[np.float64]:
    """R@k per qrels query (vectorised)."""
    sel = ranked.grade >= measure.threshold
    if measure.cutoff is not None:
        sel &= ranked.rank <= measure.cutoff
    found = ranked.per_query(sel)
    n_rel = ranked.n_relevant(measure.threshold)
    return np.divide(found, n_rel, out=np.zeros_like(found), where=n_rel > 0)


register(
    "R",
    compute,
    usage="R(rel=N)@k",
    help="relevant results in the top k / relevant judged documents of the query",
    aliases=("recall",),
    judged_only=True,
    trec_eval="recall",
    list_function=recall_at_k,
)
