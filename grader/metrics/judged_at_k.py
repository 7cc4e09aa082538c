"""Judged@k: the share of the top k results that carry any grade (0 included).

    Judged@k = |{ i <= k : doc_i has a grade }| / k

It shows where labels are still missing. The denominator is k, as P@k's (so P(rel=N)@k <=
Judged@k) and ir_measures' first Judged@k; `Judged(of=returned)@k` divides by min(k, returned),
as recent ir_measures does. Without k: the share of the whole returned list."""

from __future__ import annotations

import numpy as np

from grader.metrics._lists import Grades, top
from grader.metrics.foreign import parse_ties
from grader.metrics.judged_rows import Float, Ranked, divide
from grader.metrics.measures import Measure
from grader.metrics.registry import register


def judged_at_k(rels: Grades, k: int | None = None, of: str | None = None) -> float:
    """Judged@k of one list (unjudged documents None); `of="returned"`: of min(k, returned)."""
    shown = top(rels, k)
    judged = sum(1 for g in shown if g is not None)
    denominator = k if k is not None and of is None else len(shown)
    return judged / denominator if denominator else 0.0


def of_returned(text: str) -> str | None:
    """The parser of `of=`: `returned` divides by min(k, returned), `k` (the default) by k."""
    if text not in ("k", "returned"):
        raise ValueError("of= is k (the default) or returned (ir_measures' Judged@k)")
    return "returned" if text == "returned" else None


def compute(measure: Measure, ranked: Ranked) -> Float:
    """Judged@k per qrels query (vectorised; every row of `ranked` has a grade)."""
    k = measure.cutoff
    if k is not None and measure.param("of") is None:
        return ranked.per_query(ranked.top(k)) / k
    return judged_of_returned(ranked, k)


def judged_of_returned(ranked: Ranked, k: int | None) -> Float:
    """Per query, the judged share of the top min(k, returned) (`Judged(of=returned)@k`)."""
    returned = ranked.returned.astype(np.float64)
    shown = returned if k is None else np.minimum(returned, float(k))
    return divide(ranked.per_query(ranked.top(k)), shown)


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
