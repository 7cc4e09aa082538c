"""Expected reciprocal rank (ERR, ERR@k), as gdeval computes it (ir_measures' ERR).

A cascade user stops at result i with probability R(g_i) (Chapelle et al., 2009):

    R(g)  = (2^g - 1) / 2^4            (4 = gdeval's maximum grade, fixed: ERR is not normalised)
    ERR@k = sum_{i <= k} R(g_i) / i * prod_{j < i} (1 - R(g_j))

Unjudged documents and grades <= 0 give R = 0; a grade above 4 is an error, as in gdeval. Ties
are ranked in trec_eval's order; gdeval compares in double precision (`precision="float64"`)."""

from __future__ import annotations

import numpy as np

from grader.errors import InputError
from grader.metrics.judged_rows import Float, Grades, Ranked, top
from grader.metrics.measures import Measure
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


def compute(measure: Measure, ranked: Ranked) -> Float:
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
    compute,
    usage="ERR@k",
    help="expected reciprocal rank, gdeval's (ir_measures'): stop probability\n"
    "(2^grade-1)/16 per result; not normalised. No threshold.",
    rel=False,
    list_function=err,
)
