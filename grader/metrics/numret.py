"""NumRet: the number of results a run returned for the query (trec_eval's num_ret), judged or
not; a count, summed in the "all" row. ir_measures' `NumRet(rel=N)` is NumRelRet(rel=N)."""

from __future__ import annotations

import numpy as np

from grader.metrics._lists import Grades
from grader.metrics.judged_rows import Float, Ranked
from grader.metrics.measures import Measure
from grader.metrics.registry import register


def num_ret(rels: Grades) -> int:
    """How many results one graded list holds."""
    return len(rels)


def compute(measure: Measure, ranked: Ranked) -> Float:
    """NumRet per qrels query (vectorised)."""
    return ranked.returned.astype(np.float64)


register(
    "NumRet",
    compute,
    usage="NumRet",
    help='results returned (a count: SUMMED over queries in the "all" row)',
    rel=False,
    cutoff="none",
    aliases=("num_ret",),
    summed=True,
    with_rel="NumRelRet",
    list_function=num_ret,
)
