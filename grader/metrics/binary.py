"""The measures of binary relevance (a result is relevant when its grade reaches the threshold
`rel=N`; unjudged is not): RR, P, R, AP, Rprec and Success, as trec_eval computes them. Each
keeps trec_eval's denominator: P@k divides by k, R, AP and Rprec by the query's judged relevant
documents, returned or not. Judged@k, the share of the top k with any grade, closes the module."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from grader.metrics.foreign import parse_ties
from grader.metrics.judged_rows import Float, Grades, Ranked, divide, hits, relevant_ranks, top
from grader.metrics.measures import DEFAULT_THRESHOLD, Measure
from grader.metrics.rank_order import ranks_within
from grader.metrics.registry import register


def _of_relevant(value: float, found: int, n_relevant: int) -> float:
    """value / n_relevant (0 when the query has none), checking that the `found` relevant fit."""
    if n_relevant < found:
        raise ValueError(f"n_relevant={n_relevant} is less than the {found} relevant found")
    return value / n_relevant if n_relevant else 0.0


def reciprocal_rank(
    rels: Grades, threshold: int = DEFAULT_THRESHOLD, k: int | None = None
) -> float:
    """RR@k = 1 / min{ i <= k : rel_i >= threshold } (0 if none); without k the whole ranking
    (trec_eval's recip_rank)."""
    ranks = relevant_ranks(rels, threshold, k)
    return 1.0 / ranks[0] if ranks else 0.0


def mrr(lists: Iterable[Grades], threshold: int = DEFAULT_THRESHOLD, k: int | None = None) -> float:
    """Mean reciprocal rank over the queries' graded lists (each query counts once)."""
    values = [reciprocal_rank(rels, threshold, k) for rels in lists]
    if not values:
        raise ValueError("MRR of no queries is undefined")
    return sum(values) / len(values)


def _rr(measure: Measure, ranked: Ranked) -> Float:
    sel = ranked.relevant(measure.threshold, measure.cutoff)
    out = np.zeros(ranked.n_queries, dtype=np.float64)
    queries, first = np.unique(ranked.query[sel], return_index=True)
    out[queries] = 1.0 / ranked.rank[sel][first]
    return out


register(
    "RR",
    _rr,
    usage="RR(rel=N)@k",
    help="reciprocal rank of the first relevant result (mean over queries = MRR);\n"
    "ties=asc: equal scores by doc id ascending (ir_measures' RR@k)",
    aliases=("mrr", "recip_rank"),
    judged_only=True,
    params={"ties": parse_ties},
    defaults={"ties": None},
    list_function=reciprocal_rank,
)


def precision_at_k(rels: Grades, k: int, threshold: int = DEFAULT_THRESHOLD) -> float:
    """P@k = |{ i <= k : rel_i >= threshold }| / k, always divided by k (trec_eval's P_k): a short
    ranking is not rewarded for stopping early."""
    return hits(rels, threshold, k) / k


def _precision(measure: Measure, ranked: Ranked) -> Float:
    k: int = measure.cutoff  # type: ignore[assignment]  # the registry makes it required
    return ranked.per_query(ranked.relevant(measure.threshold, k)) / k


register(
    "P",
    _precision,
    usage="P(rel=N)@k",
    help="relevant results in the top k / k (always divided by k)",
    cutoff="required",
    aliases=("precision",),
    judged_only=True,
    trec_eval="P",
    list_function=precision_at_k,
)


def recall_at_k(
    rels: Grades, k: int | None, n_relevant: int, threshold: int = DEFAULT_THRESHOLD
) -> float:
    """R@k = |{ i <= k : rel_i >= threshold }| / n_relevant, n_relevant the query's judged
    relevant documents; without k, trec_eval's set_recall."""
    found = hits(rels, threshold, k)
    return _of_relevant(found, found, n_relevant)


def _recall(measure: Measure, ranked: Ranked) -> Float:
    found = ranked.per_query(ranked.relevant(measure.threshold, measure.cutoff))
    return divide(found, ranked.n_relevant(measure.threshold))


register(
    "R",
    _recall,
    usage="R(rel=N)@k",
    help="relevant results in the top k / relevant judged documents of the query",
    aliases=("recall",),
    judged_only=True,
    trec_eval="recall",
    list_function=recall_at_k,
)


def average_precision(
    rels: Grades, n_relevant: int, threshold: int = DEFAULT_THRESHOLD, k: int | None = None
) -> float:
    """AP@k = (1 / n_relevant) * sum_{i <= k, rel_i >= threshold} P@i (trec_eval's map; AP@k,
    map_cut_k, keeps that denominator)."""
    ranks = relevant_ranks(rels, threshold, k)
    return _of_relevant(sum(n / i for n, i in enumerate(ranks, 1)), len(ranks), n_relevant)


def _ap(measure: Measure, ranked: Ranked) -> Float:
    sel = ranked.relevant(measure.threshold, measure.cutoff)
    query = ranked.query[sel]
    # rows are sorted by query then rank, so the running count is the position among hits
    precisions = ranks_within(query) / ranked.rank[sel]
    total = np.bincount(query, weights=precisions, minlength=ranked.n_queries).astype(np.float64)
    return divide(total, ranked.n_relevant(measure.threshold))


register(
    "AP",
    _ap,
    usage="AP(rel=N)[@k]",
    help="average precision (trec_eval map / map_cut_k)",
    aliases=("map",),
    judged_only=True,
    trec_eval="map_cut",
    list_function=average_precision,
)


def r_precision(rels: Grades, n_relevant: int, threshold: int = DEFAULT_THRESHOLD) -> float:
    """Rprec = |{ i <= R : rel_i >= threshold }| / R, R = n_relevant; a ranking shorter than R
    still divides by R (trec_eval)."""
    if n_relevant < 0:
        raise ValueError("n_relevant must be >= 0")
    return hits(rels, threshold, n_relevant) / n_relevant if n_relevant else 0.0


def _rprec(measure: Measure, ranked: Ranked) -> Float:
    n_rel = ranked.n_relevant(measure.threshold)
    sel = ranked.relevant(measure.threshold) & (ranked.rank <= n_rel[ranked.query])
    return divide(ranked.per_query(sel), n_rel)


register(
    "Rprec",
    _rprec,
    usage="Rprec(rel=N)",
    help="precision at rank R = number of relevant judged documents",
    cutoff="none",
    judged_only=True,
    list_function=r_precision,
)


def success_at_k(rels: Grades, k: int, threshold: int = DEFAULT_THRESHOLD) -> float:
    """Success@k: 1.0 when any of the top k is relevant, else 0.0 (trec_eval's success_k)."""
    return 1.0 if hits(rels, threshold, k) else 0.0


def _success(measure: Measure, ranked: Ranked) -> Float:
    sel = ranked.relevant(measure.threshold, measure.cutoff)
    return (ranked.per_query(sel) > 0).astype(np.float64)


register(
    "Success",
    _success,
    usage="Success(rel=N)@k",
    help="1 if any of the top k is relevant",
    cutoff="required",
    judged_only=True,
    trec_eval="success",
    list_function=success_at_k,
)


def judged_at_k(rels: Grades, k: int | None = None, of: str | None = None) -> float:
    """Judged@k = |{ i <= k : doc_i has a grade }| / k, of one list (unjudged documents None);
    `of="returned"` divides by min(k, returned) as recent ir_measures does; no k: the whole list."""
    shown = top(rels, k)
    judged = sum(1 for g in shown if g is not None)
    denominator = k if k is not None and of is None else len(shown)
    return judged / denominator if denominator else 0.0


def _of_returned(text: str) -> str | None:
    """The parser of `of=`: `returned` divides by min(k, returned), `k` (the default) by k."""
    if text not in ("k", "returned"):
        raise ValueError("of= is k (the default) or returned (ir_measures' Judged@k)")
    return "returned" if text == "returned" else None


def _judged(measure: Measure, ranked: Ranked) -> Float:
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
    _judged,
    usage="Judged@k",
    help="share of the top k that has any grade (where labels are still missing);\n"
    "Judged(of=returned,ties=asc)@k: of min(k, returned), ties as ir_measures",
    rel=False,
    params={"of": _of_returned, "ties": parse_ties},
    defaults={"of": None, "ties": None},
    list_function=judged_at_k,
)
