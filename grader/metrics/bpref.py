"""Binary preference (Bpref): how often judged relevant results come before judged non-relevant
ones, unjudged ones skipped (trec_eval's bpref, ir_measures' Bpref).

    Bpref = (1 / R) * sum_{relevant retrieved r} (1 - min(n_r, R) / min(N, R))

R: judged relevant, N: judged non-relevant (0 <= grade < threshold), n_r: judged non-relevant
returned above r (n_r = 0 gives 1). A negative grade is neither. No k."""

from __future__ import annotations

import numpy as np

from grader.metrics._lists import Grades
from grader.metrics.judged_rows import Float, Ranked, divide
from grader.metrics.measures import DEFAULT_THRESHOLD, Measure
from grader.metrics.rank_order import sum_before_within
from grader.metrics.registry import register


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


def compute(measure: Measure, ranked: Ranked) -> Float:
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
    compute,
    usage="Bpref(rel=N)",
    help="judged relevant before judged non-relevant; unjudged results are skipped",
    cutoff="none",
    list_function=bpref,
)
