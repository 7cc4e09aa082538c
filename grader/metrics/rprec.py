"""R-precision (Rprec): precision at rank R, R the query's number of judged relevant documents;
a ranking shorter than R still divides by R (trec_eval).

    Rprec = |{ i <= R : rel_i >= threshold }| / R"""

from __future__ import annotations

from grader.metrics._lists import Grades, hits
from grader.metrics.judged_rows import Float, Ranked, divide
from grader.metrics.measures import DEFAULT_THRESHOLD, Measure
from grader.metrics.registry import register


def r_precision(rels: Grades, n_relevant: int, threshold: int = DEFAULT_THRESHOLD) -> float:
    """Rprec of one graded list, given the query's number of relevant judged documents."""
    if n_relevant < 0:
        raise ValueError("n_relevant must be >= 0")
    return hits(rels, threshold, n_relevant) / n_relevant if n_relevant else 0.0


def compute(measure: Measure, ranked: Ranked) -> Float:
    """Rprec per qrels query (vectorised)."""
    n_rel = ranked.n_relevant(measure.threshold)
    sel = ranked.relevant(measure.threshold) & (ranked.rank <= n_rel[ranked.query])
    return divide(ranked.per_query(sel), n_rel)


register(
    "Rprec",
    compute,
    usage="Rprec(rel=N)",
    help="precision at rank R = number of relevant judged documents",
    cutoff="none",
    judged_only=True,
    list_function=r_precision,
)
