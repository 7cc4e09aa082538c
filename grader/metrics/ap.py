"""Average precision (AP, AP@k): mean of the precision at each relevant result's rank.

    AP@k = (1 / n_relevant) * sum_{i <= k, rel_i >= threshold} P@i

n_relevant counts the query's judged relevant documents, returned or not (trec_eval's map;
AP@k, map_cut_k, keeps that denominator).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from grader.metrics._lists import Grades, is_relevant, top
from grader.metrics.judged_rows import Ranked
from grader.metrics.measures import DEFAULT_THRESHOLD, Measure
from grader.metrics.rank_order import ranks_within
from grader.metrics.registry import register


def average_precision(
    rels: Grades, n_relevant: int, threshold: int = DEFAULT_THRESHOLD, k: int | None = None
) -> float:
    """AP (AP@k) of one graded list, given the query's number of relevant judged documents."""
    total, found = 0.0, 0
    for i, grade in enumerate(top(rels, k), start=1):
        if is_relevant(grade, threshold):
            found += 1
            total += found / i
    if n_relevant < found:
        raise ValueError(f"n_relevant={n_relevant} is less than the {found} relevant found")
    return total / n_relevant if n_relevant else 0.0


def compute(measure: Measure, ranked: Ranked) -> npt.NDArray[np.float64]:
    """AP per qrels query (vectorised)."""
    sel = ranked.grade >= measure.threshold
    if measure.cutoff is not None:
        sel &= ranked.rank <= measure.cutoff
    query = ranked.query[sel]
    # rows are sorted by query then rank, so the running count is the position among hits
    found = ranks_within(query).astype(np.float64)
    precisions = found / ranked.rank[sel]
    total = np.bincount(query, weights=precisions, minlength=ranked.n_queries).astype(np.float64)
    n_rel = ranked.n_relevant(measure.threshold)
    return np.divide(total, n_rel, out=np.zeros_like(total), where=n_rel > 0)


register(
    "AP",
    compute,
    usage="AP(rel=N)[@k]",
    help="average precision (trec_eval map / map_cut_k)",
    aliases=("map",),
    judged_only=True,
    trec_eval="map_cut",
    list_function=average_precision,
)
