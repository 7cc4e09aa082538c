"""Expected reciprocal rank (ERR, ERR@k), as gdeval computes it (ir_measures' ERR).

A cascade user reads down the ranking and stops at result i, satisfied, with probability
R(g_i); ERR is the expected reciprocal of the rank where they stop (Chapelle et al., 2009):

    R(g)  = (2^g - 1) / 2^4            (4 = gdeval's maximum grade, fixed, not the query's)
    ERR@k = sum_{i <= k} R(g_i) / i * prod_{j < i} (1 - R(g_j))

- Matches ir_measures' ERR@k, which runs the TREC Web track's gdeval.pl (that prints 5
  decimals; relgrade keeps full precision). Because the maximum grade is fixed at 4, a grade 3
  result at rank 1 gives 7/16 = 0.4375, not 1: ERR is not normalised.
- k: only the first k results count; without k the whole ranking (gdeval always has a k; the
  sum simply runs to the end).
- No threshold: the grades are the stopping probabilities. Unjudged documents and grades
  <= 0 give R = 0 (gdeval keeps only positive judgments).
- Ranking: relgrade's trec_eval order (score descending, doc id descending). gdeval compares
  scores in double precision: with scores equal in float32 only, use `precision="float64"`.
- Edge cases: an empty ranking or a query without a positive grade scores 0. A grade above 4
  is an error, as in gdeval (R would exceed 1).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from grader.errors import InputError
from grader.metrics._lists import Grades, top
from grader.metrics.judged_rows import Ranked
from grader.metrics.measures import Measure
from grader.metrics.rank_order import sum_before_within
from grader.metrics.registry import register

MAX_GRADE = 4


def _stop_probability(grade: int | None) -> float:
    if grade is not None and grade > MAX_GRADE:
        raise ValueError(f"ERR takes grades up to {MAX_GRADE} (gdeval's maximum), got {grade}")
    return 0.0 if grade is None or grade <= 0 else (2.0**grade - 1.0) / 2.0**MAX_GRADE


def err(rels: Grades, k: int | None = None) -> float:
    """ERR (ERR@k) of one graded list (unjudged documents are None)."""
    total, reach = 0.0, 1.0
    for i, grade in enumerate(top(rels, k), start=1):
        r = _stop_probability(grade)
        total += reach * r / i
        reach *= 1.0 - r
    return total


def compute(measure: Measure, ranked: Ranked) -> npt.NDArray[np.float64]:
    """ERR per qrels query (vectorised; unjudged rows stop no one, so only judged rows count)."""
    if len(ranked.ideal_grade) and int(ranked.ideal_grade.max()) > MAX_GRADE:
        raise InputError(
            f"ERR takes grades up to {MAX_GRADE} (gdeval's maximum); the qrels hold grade "
            f"{int(ranked.ideal_grade.max())}",
            hint="map the grades onto 0..4 first, or leave ERR out",
        )
    sel = ranked.grade > 0
    if measure.cutoff is not None:
        sel &= ranked.rank <= measure.cutoff
    query, rank = ranked.query[sel], ranked.rank[sel]
    r = (np.exp2(ranked.grade[sel].astype(np.float64)) - 1.0) / 2.0**MAX_GRADE
    # P(reaching row i) = prod of (1 - r) over earlier rows of its query: an exclusive cumulative
    # sum of logs, restarted at each query (rows are sorted by query then rank)
    values = np.exp(sum_before_within(np.log1p(-r), query)) * r / rank
    out: npt.NDArray[np.float64] = np.bincount(
        query, weights=values, minlength=ranked.n_queries
    ).astype(np.float64)
    return out


register(
    "ERR",
    compute,
    usage="ERR@k",
    help=(
        "expected reciprocal rank, gdeval's (ir_measures'): stop probability\n"
        "(2^grade-1)/16 per result; not normalised. No threshold."
    ),
    rel=False,
    list_function=err,
)
