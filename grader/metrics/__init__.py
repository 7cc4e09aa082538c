"""The metrics core: measure names, list functions on graded lists, and the vectorised evaluator.
Pure (no I/O, no LLM); every measure agrees with trec_eval to 1e-9 (docs/adding-a-measure.md).
"""

from grader.metrics.ap import average_precision
from grader.metrics.evaluate import evaluate, mean_scores
from grader.metrics.judged_at_k import judged_at_k
from grader.metrics.measures import (
    DEFAULT_MEASURES,
    DEFAULT_THRESHOLD,
    Measure,
    parse_measure,
    parse_measures,
)
from grader.metrics.ndcg import dcg, ndcg
from grader.metrics.precision import precision_at_k
from grader.metrics.recall import recall_at_k
from grader.metrics.rprec import r_precision
from grader.metrics.rr import mrr, reciprocal_rank
from grader.metrics.success import success_at_k

__all__ = [
    "DEFAULT_MEASURES",
    "DEFAULT_THRESHOLD",
    "Measure",
    "average_precision",
    "dcg",
    "evaluate",
    "judged_at_k",
    "mean_scores",
    "mrr",
    "ndcg",
    "parse_measure",
    "parse_measures",
    "precision_at_k",
    "r_precision",
    "recall_at_k",
    "reciprocal_rank",
    "success_at_k",
]
