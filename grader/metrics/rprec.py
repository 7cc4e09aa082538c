"""R-precision (Rprec): precision at rank R, R the query's number of judged relevant documents;
a ranking shorter than R still divides by R (trec_eval).

    Rprec = |{ i <= R : rel_i >= threshold }| / R
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from grader.metrics._lists import Grades, hits
from grader.metrics.judged_rows import Ranked
from grader.metrics.measures import DEFAULT_THRESHOLD, Measure
from grader.metrics.registry import register


def r_precision(rels: Grades, n_relevant: int, threshold: int = DEFAULT_THRESHOLD) -> float:
    """Rprec of one graded list, given the query's number of relevant judged documents."""
    if n_relevant < 0:
        raise ValueError("n_relevant must be >= 0")
    if n_relevant == 0:
        return 0.0
    return hits(rels[:n_relevant], threshold) / n_relevant


def compute(measure: Measure, ranked: Ranked) -> npt.NDArray[np.float64]:
    """Rprec per qrels query (vectorised)."""
    n_rel = ranked.n_relevant(measure.threshold)
    sel = (ranked.grade >= measure.threshold) & (ranked.rank <= n_rel[ranked.query])
    found = ranked.per_query(sel)
    return np.divide(found, n_rel, out=np.zeros_like(found), where=n_rel > 0)


register(
    "Rprec",
    compute,
    usage="Rprec(rel=N)",
    help="precision at rank R = number of relevant judged documents",
    cutoff="none",
    judged_only=True,
    list_function=r_precision,
)
