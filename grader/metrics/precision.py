"""Precision at k (P@k): the share of the top k results that are relevant.

    P@k = |{ i <= k : rel_i >= threshold }| / k

Always divided by k (trec_eval's P_k): a short ranking is not rewarded for stopping early."""

from __future__ import annotations

from grader.metrics._lists import Grades, hits
from grader.metrics.judged_rows import Float, Ranked
from grader.metrics.measures import DEFAULT_THRESHOLD, Measure
from grader.metrics.registry import register


def precision_at_k(rels: Grades, k: int, threshold: int = DEFAULT_THRESHOLD) -> float:
    """P@k of one graded list."""
    return hits(rels, threshold, k) / k


def compute(measure: Measure, ranked: Ranked) -> Float:
    """P@k per qrels query (vectorised; the registry makes the cutoff required)."""
    k: int = measure.cutoff  # type: ignore[assignment]
    return ranked.per_query(ranked.relevant(measure.threshold, k)) / k


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
