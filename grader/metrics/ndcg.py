"""Normalised discounted cumulative gain (nDCG, nDCG@k), trec_eval's ndcg and ndcg_cut.

    DCG@k  = sum_{i <= k} gain(rel_i) / log2(i + 1),   nDCG@k = DCG@k / IDCG@k

- gain: linear g (trec_eval's) or exponential 2^g - 1 (`gain=exp`); unjudged documents and
  negative grades (TREC Web's junk) gain 0, as in trec_eval's gain table.
- IDCG@k ranks ALL the query's judged grades, returned or not: an ideal built from the returned
  list would give a run that found 3 of 5 relevant documents nDCG = 1.0.
- No threshold. A query with IDCG = 0, or an empty ranking, scores 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from grader.metrics import ndcg_gains
from grader.metrics._lists import Grades, top
from grader.metrics.judged_rows import Ranked
from grader.metrics.measures import Measure
from grader.metrics.registry import register

Gain = str


def _gain(grade: int | None, gain: Gain) -> float:
    if grade is None or grade <= 0:
        return 0.0
    if gain == "exp":
        return float(2**grade - 1)
    if gain == "linear":
        return float(grade)
    raise ValueError(f"unknown gain {gain!r}; use 'linear' or 'exp'")


def dcg(rels: Grades, k: int | None = None, gain: Gain = "linear") -> float:
    """DCG of one graded list (the first k results when k is given)."""
    return sum(_gain(g, gain) / float(np.log2(i + 1)) for i, g in enumerate(top(rels, k), 1))


def ndcg(rels: Grades, ideal: Sequence[int], k: int | None = None, gain: Gain = "linear") -> float:
    """nDCG of one graded list against `ideal`, all the judged grades of the query (any order)."""
    best = dcg(sorted(ideal, reverse=True), k, gain)
    return dcg(rels, k, gain) / best if best > 0 else 0.0


def _gains(grades: npt.NDArray[np.int64], gain: str | None) -> npt.NDArray[np.float64]:
    positive = np.maximum(grades, 0).astype(np.float64)
    return np.exp2(positive) - 1.0 if gain == "exp" else positive


def compute(measure: Measure, ranked: Ranked) -> npt.NDArray[np.float64]:
    """nDCG per qrels query (vectorised; with a gain map, `ndcg_gains`)."""
    if measure.gains:
        return ndcg_gains.compute(measure, ranked)
    k = measure.cutoff
    sel = ranked.rank <= k if k is not None else np.ones(len(ranked.rank), dtype=bool)
    weights = _gains(ranked.grade, measure.gain) / np.log2(ranked.rank + 1.0)
    actual = ranked.per_query(sel, weights)
    isel = ranked.ideal_pos <= k if k is not None else np.ones(len(ranked.ideal_pos), dtype=bool)
    iweights = _gains(ranked.ideal_grade[isel], measure.gain) / np.log2(
        ranked.ideal_pos[isel] + 1.0
    )
    best = np.bincount(
        ranked.ideal_query[isel], weights=iweights, minlength=ranked.n_queries
    ).astype(np.float64)
    return np.divide(actual, best, out=np.zeros_like(actual), where=best > 0)


register(
    "nDCG",
    compute,
    usage="nDCG@k",
    help=(
        "normalised DCG, linear gain (the grade); nDCG(gain=exp)@k uses 2^grade-1.\n"
        "The ideal ranking is built from ALL judged grades of the query, not from the\n"
        "returned list, so missing relevant documents lower it. No threshold."
    ),
    rel=False,
    judged_only=True,
    gain=True,
    trec_eval="ndcg_cut",
    list_function=ndcg,
)
