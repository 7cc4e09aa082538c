"""Judged@k: the share of the top k results that carry any grade (0 included).

    Judged@k = |{ i <= k : doc_i has a grade }| / k

It shows where labels are still missing: a run scored with LLM labels that are absent for a
third of its top 10 has Judged@10 = 0.67, and its other measures treat those documents as
non-relevant.

- k: the denominator is always k, like P@k and ir_measures' original Judged@k, also when fewer
  than k documents were returned (a 3-result list fully graded has Judged@10 = 0.3). Recent
  ir_measures releases divide by min(k, returned) instead; relgrade keeps k so that Judged@k
  and P@k share a denominator (P(rel=N)@k <= Judged@k always holds). `Judged(of=returned)@k`
  is ir_measures' (0.4) reading, what `ir_measures.Judged@k` becomes here. Without k: the share
  of the whole returned list (0 for an empty list), which is the "min" reading.
- No threshold: a grade of 0 is a judgment too.
- Edge cases: an empty ranking scores 0.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from grader.metrics._lists import Grades, top
from grader.metrics.foreign import parse_ties
from grader.metrics.judged_rows import Ranked
from grader.metrics.measures import Measure
from grader.metrics.registry import register


def judged_at_k(rels: Grades, k: int | None = None, of: str | None = None) -> float:
    """Judged@k of one list whose unjudged documents are None; `of="returned"` divides by
    min(k, returned) (`Judged(of=returned)@k`)."""
    shown = top(rels, k)
    judged = sum(1 for g in shown if g is not None)
    denominator = k if k is not None and of is None else len(shown)
    return judged / denominator if denominator else 0.0


def of_returned(text: str) -> str | None:
    """The parser of `of=`: `returned` divides by min(k, returned), `k` (the default) by k."""
    if text not in ("k", "returned"):
        raise ValueError("of= is k (the default) or returned (ir_measures' Judged@k)")
    return "returned" if text == "returned" else None


def compute(measure: Measure, ranked: Ranked) -> npt.NDArray[np.float64]:
    """Judged@k per qrels query (vectorised; every row of `ranked` has a grade)."""
    k = measure.cutoff
    if k is not None and measure.param("of") is None:
        return ranked.per_query(ranked.rank <= k) / k
    within = ranked.rank <= k if k is not None else np.ones(len(ranked.rank), dtype=bool)
    found = ranked.per_query(within)
    returned = ranked.returned.astype(np.float64)
    if k is not None:
        returned = np.minimum(returned, float(k))
    return np.divide(found, returned, out=np.zeros_like(found), where=returned > 0)


register(
    "Judged",
    compute,
    usage="Judged@k",
    help="share of the top k that has any grade (where labels are still missing);\n"
    "Judged(of=returned,ties=asc)@k: of min(k, returned), ties as ir_measures",
    rel=False,
    params={"of": of_returned, "ties": parse_ties},
    defaults={"of": None, "ties": None},
    list_function=judged_at_k,
)
