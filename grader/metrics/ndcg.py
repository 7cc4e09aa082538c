"""Normalised discounted cumulative gain (nDCG, nDCG@k), trec_eval's ndcg and ndcg_cut.

    DCG@k  = sum_{i <= k} gain(rel_i) / log2(i + 1),   nDCG@k = DCG@k / IDCG@k

- gain: linear g (trec_eval's), exponential 2^g - 1 (`gain=exp`) or ir_measures' map
  (`gains={0:0,1:1,2:3,3:7}`: gains.get(g, g)); unjudged documents and negative grades (TREC
  Web's junk) gain 0, as in trec_eval's gain table.
- IDCG@k ranks ALL the query's judged grades by gain, returned or not: an ideal built from the
  returned list would give a run that found 3 of 5 relevant documents nDCG = 1.0.
- No threshold. A query with IDCG = 0, or an empty ranking, scores 0."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from grader.metrics.judged_rows import Float, Grades, Int, Ranked, divide, top
from grader.metrics.measures import Measure
from grader.metrics.rank_order import ranks_within
from grader.metrics.registry import Gains, register


def _gain(grade: int | None, gain: str, gains: Gains) -> float:
    if grade is None or grade < 0:
        return 0.0
    if gains:
        return float(dict(gains).get(grade, grade))
    if gain == "exp":
        return float(2**grade - 1)
    if gain == "linear":
        return float(grade)
    raise ValueError(f"unknown gain {gain!r}; use 'linear' or 'exp'")


def dcg(rels: Grades, k: int | None = None, gain: str = "linear", gains: Gains = ()) -> float:
    """DCG of one graded list (the first k results when k is given)."""
    shown = enumerate(top(rels, k), 1)
    return sum(_gain(g, gain, gains) / float(np.log2(i + 1)) for i, g in shown)


def ndcg(
    rels: Grades,
    ideal: Sequence[int],
    k: int | None = None,
    gain: str = "linear",
    gains: Gains = (),
) -> float:
    """nDCG of one graded list against `ideal`, all the judged grades of the query (any order)."""
    best = sorted(ideal, key=lambda g: _gain(g, gain, gains), reverse=True)
    best_dcg = dcg(best, k, gain, gains)
    return dcg(rels, k, gain, gains) / best_dcg if best_dcg > 0 else 0.0


def _gains(grades: Int, measure: Measure) -> Float:
    out = np.maximum(grades, 0).astype(np.float64)
    if measure.gain == "exp":
        return np.exp2(out) - 1.0
    for grade, gain in measure.gains:
        out[grades == grade] = gain
    return out


def compute(measure: Measure, ranked: Ranked) -> Float:
    """nDCG per qrels query (vectorised)."""
    k = measure.cutoff
    weights = _gains(ranked.grade, measure) / np.log2(ranked.rank + 1.0)
    actual = ranked.per_query(ranked.top(k), weights)
    query, grade, pos = ranked.ideal_query, ranked.ideal_grade, ranked.ideal_pos
    if measure.gains:  # a map need not keep the grades' order: rank the judgments by gain
        order = np.lexsort((-_gains(grade, measure), query))
        query, grade = query[order], grade[order]
        pos = ranks_within(query)
    keep = pos <= k if k is not None else np.ones(len(pos), dtype=bool)
    iweights = _gains(grade[keep], measure) / np.log2(pos[keep] + 1.0)
    best = np.bincount(query[keep], weights=iweights, minlength=ranked.n_queries)
    return divide(actual, best.astype(np.float64))


register(
    "nDCG",
    compute,
    usage="nDCG@k",
    help="normalised DCG, linear gain (the grade); nDCG(gain=exp)@k uses 2^grade-1.\n"
    "The ideal ranking is built from ALL judged grades of the query, not from the\n"
    "returned list, so missing relevant documents lower it. No threshold.",
    rel=False,
    judged_only=True,
    gain=True,
    trec_eval="ndcg_cut",
    list_function=ndcg,
)
