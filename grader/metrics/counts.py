"""The counts trec_eval reports per query, summed in the "all" row: NumRet (num_ret, results
returned, judged or not), NumRel (num_rel, judged relevant documents, returned or not: the
denominator of recall, AP and Rprec) and NumRelRet (num_rel_ret, relevant results returned).
ir_measures' `NumRet(rel=N)` is NumRelRet(rel=N)."""

from __future__ import annotations

import numpy as np

from grader.metrics._lists import Grades, hits
from grader.metrics.judged_rows import Float, Ranked
from grader.metrics.measures import DEFAULT_THRESHOLD, Measure
from grader.metrics.registry import register


def num_ret(rels: Grades) -> int:
    """How many results one graded list holds."""
    return len(rels)


def _num_ret(measure: Measure, ranked: Ranked) -> Float:
    return ranked.returned.astype(np.float64)


register(
    "NumRet",
    _num_ret,
    usage="NumRet",
    help='results returned (a count: SUMMED over queries in the "all" row)',
    rel=False,
    cutoff="none",
    aliases=("num_ret",),
    summed=True,
    with_rel="NumRelRet",
    list_function=num_ret,
)


def num_rel(judged: list[int], threshold: int = DEFAULT_THRESHOLD) -> int:
    """How many of the query's judged grades reach the threshold."""
    return hits(judged, threshold)


def _num_rel(measure: Measure, ranked: Ranked) -> Float:
    return ranked.n_relevant(measure.threshold)


register(
    "NumRel",
    _num_rel,
    usage="NumRel(rel=N)",
    help="relevant judged documents of the query (a count, SUMMED likewise)",
    cutoff="none",
    aliases=("num_rel",),
    summed=True,
    list_function=num_rel,
)


def num_rel_ret(rels: Grades, threshold: int = DEFAULT_THRESHOLD) -> int:
    """How many results of one graded list reach the threshold."""
    return hits(rels, threshold)


def _num_rel_ret(measure: Measure, ranked: Ranked) -> Float:
    return ranked.per_query(ranked.relevant(measure.threshold))


register(
    "NumRelRet",
    _num_rel_ret,
    usage="NumRelRet(rel=N)",
    help="relevant results returned (ir_measures' NumRet(rel=N); a count, SUMMED)",
    cutoff="none",
    aliases=("num_rel_ret",),
    summed=True,
    list_function=num_rel_ret,
)
