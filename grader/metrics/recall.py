"""Recall at k (R@k): the share of the query's judged relevant documents found in the top k.

    R@k = |{ i <= k : rel_i >= threshold }| / n_relevant

n_relevant counts judged documents, never returned ones; without k, trec_eval's set_recall."""

from __future__ import annotations

from grader.metrics._lists import Grades, hits, of_relevant
from grader.metrics.judged_rows import Float, Ranked, divide
from grader.metrics.measures import DEFAULT_THRESHOLD, Measure
from grader.metrics.registry import register


def recall_at_k(
    rels: Grades, k: int | None, n_relevant: int, threshold: int = DEFAULT_THRESHOLD
) -> float:
    """R@k of one graded list, given the query's number of relevant judged documents."""
    found = hits(rels, threshold, k)
    return of_relevant(found, found, n_relevant)


def compute(measure: Measure, ranked: Ranked) -> Float:
    """R@k per qrels query (vectorised)."""
    found = ranked.per_query(ranked.relevant(measure.threshold, measure.cutoff))
    return divide(found, ranked.n_relevant(measure.threshold))


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
