"""NumRelRet(rel=N): the relevant results the run returned (trec_eval's num_rel_ret; ir_measures'
`NumRet(rel=N)`); a count, summed in the "all" row."""

from __future__ import annotations

from grader.metrics._lists import Grades, hits
from grader.metrics.judged_rows import Float, Ranked
from grader.metrics.measures import DEFAULT_THRESHOLD, Measure
from grader.metrics.registry import register


def num_rel_ret(rels: Grades, threshold: int = DEFAULT_THRESHOLD) -> int:
    """How many results of one graded list reach the threshold."""
    return hits(rels, threshold)


def compute(measure: Measure, ranked: Ranked) -> Float:
    """NumRelRet per qrels query (vectorised)."""
    return ranked.per_query(ranked.relevant(measure.threshold))


register(
    "NumRelRet",
    compute,
    usage="NumRelRet(rel=N)",
    help="relevant results returned (ir_measures' NumRet(rel=N); a count, SUMMED)",
    cutoff="none",
    aliases=("num_rel_ret",),
    summed=True,
    list_function=num_rel_ret,
)
