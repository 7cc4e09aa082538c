"""The measures listed after Judged: ERR, Bpref and the counts trec_eval reports.

ERR (gdeval's, ir_measures' ERR; Chapelle et al., 2009): a cascade user stops at result i with
probability R(g_i); not normalised; ties in trec_eval's order. Unjudged and grades <= 0 give R = 0;
a grade above 4 is an error (gdeval's maximum); gdeval compares in double (`precision="float64"`).

    R(g)  = (2^g - 1) / 2^4
    ERR@k = sum_{i <= k} R(g_i) / i * prod_{j < i} (1 - R(g_j))

Bpref (trec_eval's bpref, ir_measures' Bpref): how often judged relevant results come before
judged non-relevant ones, unjudged ones skipped; no k.

    Bpref = (1 / R) * sum_{relevant retrieved r} (1 - min(n_r, R) / min(N, R))

R: judged relevant, N: judged non-relevant (0 <= grade < threshold), n_r: judged non-relevant
returned above r (n_r = 0 gives 1); a negative grade is neither. NumRet (num_ret, results
returned, judged or not), NumRel (num_rel, judged relevant documents, returned or not: the
denominator of recall, AP and Rprec), NumRelRet (num_rel_ret, relevant results returned), summed
in the "all" row; ir_measures' `NumRet(rel=N)` is NumRelRet(rel=N)."""

from __future__ import annotations

import numpy as np

from grader.errors import InputError
from grader.metrics.judged_rows import Float, Grades, Ranked, divide, hits, top
from grader.metrics.measures import DEFAULT_THRESHOLD, Measure
from grader.metrics.rank_order import sum_before_within
from grader.metrics.registry import register

MAX_GRADE = 4


def err(rels: Grades, k: int | None = None) -> float:
    """ERR (ERR@k) of one graded list (unjudged documents are None)."""
    total, reach = 0.0, 1.0
    for i, grade in enumerate(top(rels, k), start=1):
        if grade is not None and grade > MAX_GRADE:
            raise ValueError(f"ERR takes grades up to {MAX_GRADE} (gdeval's maximum), got {grade}")
        r = 0.0 if grade is None or grade <= 0 else (2.0**grade - 1.0) / 2.0**MAX_GRADE
        total += reach * r / i
        reach *= 1.0 - r
    return total


def _err(measure: Measure, ranked: Ranked) -> Float:
    """ERR per qrels query (vectorised; unjudged rows stop no one, so only judged rows count)."""
    if len(ranked.ideal_grade) and int(ranked.ideal_grade.max()) > MAX_GRADE:
        raise InputError(
            f"ERR takes grades up to {MAX_GRADE} (gdeval's maximum); the qrels hold grade "
            f"{int(ranked.ideal_grade.max())}",
            hint="map the grades onto 0..4 first, or leave ERR out",
        )
    sel = ranked.relevant(1, measure.cutoff)
    query, rank = ranked.query[sel], ranked.rank[sel]
    r = (np.exp2(ranked.grade[sel].astype(np.float64)) - 1.0) / 2.0**MAX_GRADE
    # P(reaching row i) = prod of (1 - r) over earlier rows of its query: an exclusive cumulative
    # sum of logs, restarted at each query (rows are sorted by query then rank)
    values = np.exp(sum_before_within(np.log1p(-r), query)) * r / rank
    return np.bincount(query, weights=values, minlength=ranked.n_queries).astype(np.float64)


register(
    "ERR",
    _err,
    usage="ERR@k",
    help="expected reciprocal rank, gdeval's (ir_measures'): stop probability\n"
    "(2^grade-1)/16 per result; not normalised. No threshold.",
    rel=False,
    list_function=err,
)


def bpref(
    rels: Grades, n_relevant: int, n_nonrelevant: int, threshold: int = DEFAULT_THRESHOLD
) -> float:
    """Bpref of one graded list, given the query's judged relevant and non-relevant counts."""
    if n_relevant == 0:
        return 0.0
    total, nonrel_above = 0.0, 0
    for grade in rels:
        if grade is None or grade < 0:
            continue
        if grade < threshold:
            nonrel_above += 1
        elif nonrel_above:
            total += 1.0 - min(nonrel_above, n_relevant) / min(n_nonrelevant, n_relevant)
        else:
            total += 1.0
    return total / n_relevant


def _bpref(measure: Measure, ranked: Ranked) -> Float:
    """Bpref per qrels query (vectorised)."""
    t = measure.threshold
    n_rel = ranked.n_relevant(t)
    n_nonrel = ranked.n_relevant(0) - n_rel  # judged 0 <= grade < t
    nonrel = (ranked.grade >= 0) & (ranked.grade < t)
    relevant = ranked.relevant(t)
    # non-relevant rows above each row of its query (rows are sorted by query then rank)
    above = sum_before_within(nonrel.astype(np.int64), ranked.query)
    query = ranked.query[relevant]
    seen = above[relevant].astype(np.float64)
    r, n = n_rel[query], n_nonrel[query]
    denominator = np.minimum(n, r)
    terms = np.where(
        seen > 0,
        1.0 - np.minimum(seen, r) / np.where(denominator > 0, denominator, 1.0),
        1.0,
    )
    total = np.bincount(query, weights=terms, minlength=ranked.n_queries).astype(np.float64)
    return divide(total, n_rel)


register(
    "Bpref",
    _bpref,
    usage="Bpref(rel=N)",
    help="judged relevant before judged non-relevant; unjudged results are skipped",
    cutoff="none",
    list_function=bpref,
)


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
