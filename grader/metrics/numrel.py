"""NumRel(rel=N): the number of documents judged relevant for the query (trec_eval's num_rel).

    NumRel = |{ judged d : grade(d) >= threshold }|

- It does not depend on the ranking: it is the denominator of recall, AP and Rprec, shown so
  that a number like R@100 = 0.5 can be read as "5 of 10".
- A count: the "all" row is the sum over queries, not the mean (trec_eval, ir_measures).
- threshold: binary relevance level, default 2 (ir_measures' NumRel defaults to 1; the
  printed name always shows the threshold).
- Edge cases: a query the run does not answer counts 0, like every measure of an unanswered
  query (trec_eval -c evaluates only answered queries and ir_measures fills in 0).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from grader.metrics._lists import is_relevant
from grader.metrics.judged_rows import Ranked
from grader.metrics.measures import DEFAULT_THRESHOLD, Measure
from grader.metrics.registry import register


def num_rel(judged: list[int], threshold: int = DEFAULT_THRESHOLD) -> int:
    """How many of the query's judged grades reach the threshold."""
    return sum(1 for g in judged if is_relevant(g, threshold))


def compute(measure: Measure, ranked: Ranked) -> npt.NDArray[np.float64]:
    """NumRel per qrels query (vectorised)."""
    return ranked.n_relevant(measure.threshold)


register(
    "NumRel",
    compute,
    usage="NumRel(rel=N)",
    help="relevant judged documents of the query (a count, SUMMED likewise)",
    cutoff="none",
    aliases=("num_rel",),
    summed=True,
    list_function=num_rel,
)
