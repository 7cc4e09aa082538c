"""Success at k (Success@k): 1 when any of the top k results is relevant, else 0 (trec_eval's
success_k)."""

from __future__ import annotations

import numpy as np

from grader.metrics._lists import Grades, hits
from grader.metrics.judged_rows import Float, Ranked
from grader.metrics.measures import DEFAULT_THRESHOLD, Measure
from grader.metrics.registry import register


def success_at_k(rels: Grades, k: int, threshold: int = DEFAULT_THRESHOLD) -> float:
    """Success@k of one graded list (1.0 or 0.0)."""
    return 1.0 if hits(rels, threshold, k) else 0.0


def compute(measure: Measure, ranked: Ranked) -> Float:
    """Success@k per qrels query (vectorised; the registry makes the cutoff required)."""
    sel = ranked.relevant(measure.threshold, measure.cutoff)
    return (ranked.per_query(sel) > 0).astype(np.float64)


register(
    "Success",
    compute,
    usage="Success(rel=N)@k",
    help="1 if any of the top k is relevant",
    cutoff="required",
    judged_only=True,
    trec_eval="success",
    list_function=success_at_k,
)
