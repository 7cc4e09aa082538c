"""The metrics core: measure names, list functions on graded lists, and the vectorised evaluator.
Pure (no I/O, no LLM); every measure agrees with trec_eval to 1e-9 (docs/adding-a-measure.md)."""

from grader.metrics.binary import average_precision as average_precision
from grader.metrics.binary import judged_at_k as judged_at_k
from grader.metrics.binary import mrr as mrr
from grader.metrics.binary import precision_at_k as precision_at_k
from grader.metrics.binary import r_precision as r_precision
from grader.metrics.binary import recall_at_k as recall_at_k
from grader.metrics.binary import reciprocal_rank as reciprocal_rank
from grader.metrics.binary import success_at_k as success_at_k
from grader.metrics.evaluate import evaluate as evaluate
from grader.metrics.evaluate import mean_scores as mean_scores
from grader.metrics.measures import DEFAULT_MEASURES as DEFAULT_MEASURES
from grader.metrics.measures import DEFAULT_THRESHOLD as DEFAULT_THRESHOLD
from grader.metrics.measures import Measure as Measure
from grader.metrics.measures import parse_measure as parse_measure
from grader.metrics.measures import parse_measures as parse_measures
from grader.metrics.ndcg import dcg as dcg
from grader.metrics.ndcg import ndcg as ndcg
