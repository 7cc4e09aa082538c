"""Judged@k: the share of the top k results that carry any grade (0 included).

    Judged@k = |{ i <= k : doc_i has a grade }| / k

It shows where labels are still missing. The denominator is k, as P@k's (so P(rel=N)@k <=
Judged@k) and ir_measures' first Judged@k; `Judged(of=returned)@k` divides by min(k, returned),
as recent ir_measures does. Without k: the share of the whole returned list.
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
