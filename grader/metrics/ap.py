"""Average precision (AP, AP@k): mean of the precision at each relevant result's rank.

    AP@k = (1 / n_relevant) * sum_{i <= k, rel_i >= threshold} P@i

n_relevant counts the query's judged relevant documents, returned or not (trec_eval's map;
AP@k, map_cut_k, keeps that denominator)."""

from __future__ import annotations

import numpy as np

from grader.metrics._lists import Grades, of_relevant, relevant_ranks
from grader.metrics.judged_rows import Float, Ranked, divide
from grader.metrics.measures import DEFAULT_THRESHOLD, Measure
from grader.metrics.rank_order import ranks_within
from grader.metrics.registry import register


def average_precision(
    rels: Grades, n_relevant: int, threshold: int = DEFAULT_THRESHOLD, k: int | None = None
) -> float:
    """AP (AP@k) of one graded list, given the query's number of relevant judged documents."""
    ranks = relevant_ranks(rels, threshold, k)
    return of_relevant(sum(n / i for n, i in enumerate(ranks, 1)), len(ranks), n_relevant)


def compute(measure: Measure, ranked: Ranked) -> Float:
    """AP per qrels query (vectorised)."""
    sel = ranked.relevant(measure.threshold, measure.cutoff)
    query = ranked.query[sel]
    # rows are sorted by query then rank, so the running count is the position among hits
    precisions = ranks_within(query) / ranked.rank[sel]
    total = np.bincount(query, weights=precisions, minlength=ranked.n_queries).astype(np.float64)
    return divide(total, ranked.n_relevant(measure.threshold))


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
