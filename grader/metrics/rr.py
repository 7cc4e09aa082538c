"""Reciprocal rank (RR, RR@k) and its mean over queries (MRR).

    RR@k = 1 / min{ i <= k : rel_i >= threshold }      (0 if the set is empty)

Without k the whole ranking counts (trec_eval's recip_rank; RR@k is it on the top k)."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from grader.metrics._lists import Grades, relevant_ranks
from grader.metrics.foreign import parse_ties
from grader.metrics.judged_rows import Float, Ranked
from grader.metrics.measures import DEFAULT_THRESHOLD, Measure
from grader.metrics.registry import register


def reciprocal_rank(
    rels: Grades, threshold: int = DEFAULT_THRESHOLD, k: int | None = None
) -> float:
    """RR of one graded list: 1/rank of the first grade >= threshold, 0 when none."""
    ranks = relevant_ranks(rels, threshold, k)
    return 1.0 / ranks[0] if ranks else 0.0


def mrr(lists: Iterable[Grades], threshold: int = DEFAULT_THRESHOLD, k: int | None = None) -> float:
    """Mean reciprocal rank over the queries' graded lists (each query counts once)."""
    values = [reciprocal_rank(rels, threshold, k) for rels in lists]
    if not values:
        raise ValueError("MRR of no queries is undefined")
    return sum(values) / len(values)


def compute(measure: Measure, ranked: Ranked) -> Float:
    """RR per qrels query (vectorised)."""
    sel = ranked.relevant(measure.threshold, measure.cutoff)
    out = np.zeros(ranked.n_queries, dtype=np.float64)
    queries, first = np.unique(ranked.query[sel], return_index=True)
    out[queries] = 1.0 / ranked.rank[sel][first]
    return out


register(
    "RR",
    compute,
    usage="RR(rel=N)@k",
    help="reciprocal rank of the first relevant result (mean over queries = MRR);\n"
    "ties=asc: equal scores by doc id ascending (ir_measures' RR@k)",
    aliases=("mrr", "recip_rank"),
    judged_only=True,
    params={"ties": parse_ties},
    defaults={"ties": None},
    list_function=reciprocal_rank,
)
