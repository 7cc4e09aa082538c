"""Invariants of every measure (hypothesis), on both the list functions and the evaluator."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.metrics import (
    average_precision,
    evaluate,
    judged_at_k,
    ndcg,
    precision_at_k,
    r_precision,
    recall_at_k,
    reciprocal_rank,
    success_at_k,
)
from grader.metrics.rank_order import Precision, rank_order
from tests.helpers.hypothesis_scale import examples

grades = st.integers(min_value=0, max_value=3)
graded_lists = st.lists(st.one_of(grades, st.none()), max_size=30)
cutoffs = st.integers(min_value=1, max_value=40)
thresholds = st.integers(min_value=1, max_value=3)
MEASURES = [
    "nDCG",
    "nDCG@5",
    "nDCG(gain=exp)@10",
    "RR",
    "RR(rel=1)@3",
    "P@5",
    "P(rel=3)@10",
    "R@10",
    "R(rel=1)",
    "AP",
    "AP(rel=3)@5",
    "Rprec(rel=1)",
    "Success@3",
    "Judged@10",
    "Judged",
]


def _n_relevant(rels: list[int | None], extra: int, t: int) -> int:
    """Relevant judged documents: those returned plus `extra` the run missed."""
    return sum(1 for g in rels if g is not None and g >= t) + extra


@given(graded_lists, cutoffs, thresholds, st.integers(min_value=0, max_value=5))
def test_every_list_measure_is_between_0_and_1(
    rels: list[int | None], k: int, t: int, extra: int
) -> None:
    n_rel = _n_relevant(rels, extra, t)
    ideal = [g for g in rels if g is not None] + [3] * extra
    values = [
        reciprocal_rank(rels, t),
        reciprocal_rank(rels, t, k),
        precision_at_k(rels, k, t),
        recall_at_k(rels, k, n_rel, t),
        average_precision(rels, n_rel, t),
        average_precision(rels, n_rel, t, k),
        r_precision(rels, n_rel, t),
        success_at_k(rels, k, t),
        ndcg(rels, ideal),
        ndcg(rels, ideal, k, gain="exp"),
        judged_at_k(rels, k),
        judged_at_k(rels),
    ]
    assert all(0.0 <= v <= 1.0 + 1e-12 for v in values)


@given(graded_lists, cutoffs, thresholds)
def test_precision_times_k_counts_the_hits_in_the_top_k(
    rels: list[int | None], k: int, t: int
) -> None:
    hits = sum(1 for g in rels[:k] if g is not None and g >= t)
    assert precision_at_k(rels, k, t) * k == pytest.approx(hits)


@given(st.lists(st.one_of(grades, st.none()), max_size=20), thresholds, grades)
def test_rr_is_1_when_the_first_document_is_relevant(
    rest: list[int | None], t: int, first: int
) -> None:
    rels = [max(first, t), *rest]
    assert reciprocal_rank(rels, t) == 1.0


@given(st.lists(grades, min_size=1, max_size=30), st.one_of(st.none(), cutoffs))
def test_ndcg_is_1_for_the_ideal_ordering(judged: list[int], k: int | None) -> None:
    ideal_order = sorted(judged, reverse=True)
    expected = 1.0 if any(judged) else 0.0  # no gain at all: 0 like trec_eval
    assert ndcg(ideal_order, judged, k) == pytest.approx(expected)
    assert ndcg(ideal_order, judged, k, gain="exp") == pytest.approx(expected)


@st.composite
def qrels_and_run(draw: st.DrawFn) -> tuple[pd.DataFrame, pd.DataFrame]:
    n_queries = draw(st.integers(min_value=1, max_value=5))
    qrels_rows, run_rows = [], []
    for q in range(n_queries):
        judged = draw(st.lists(grades, max_size=8))
        qrels_rows += [(f"q{q}", f"d{i}", g) for i, g in enumerate(judged)]
        if not judged:
            qrels_rows.append((f"q{q}", "only", 0))
        returned = draw(st.lists(st.integers(0, 12), unique=True, max_size=12))
        scores = draw(st.lists(st.integers(0, 4), min_size=len(returned), max_size=len(returned)))
        run_rows += [(f"q{q}", f"d{d}", float(s)) for d, s in zip(returned, scores, strict=True)]
    qrels = pd.DataFrame(qrels_rows, columns=["query_id", "doc_id", "grade"])
    run = pd.DataFrame(run_rows, columns=["query_id", "doc_id", "score"])
    return qrels, run


@settings(max_examples=examples(60), deadline=None)
@given(qrels_and_run())
def test_the_evaluator_keeps_every_measure_between_0_and_1(
    data: tuple[pd.DataFrame, pd.DataFrame],
) -> None:
    qrels, run = data
    per_query = evaluate(qrels, run, MEASURES)
    assert per_query["value"].between(0.0, 1.0 + 1e-12).all()
    assert len(per_query) == qrels["query_id"].nunique() * len(MEASURES)


@settings(max_examples=examples(80), deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["q1", "q2", "q3"]),
            st.text(alphabet="aAzZ09_é€\U0001f600", min_size=1, max_size=4),
            st.sampled_from([0.0, -0.0, 1.0, 1.0 + 1e-9, 2.5, -3.0, 1e30]),
        ),
        max_size=40,
        unique_by=lambda row: (row[0], row[1]),
    ),
    st.sampled_from(["float32", "float64"]),
)
def test_rank_order_is_trec_evals_order(
    rows: list[tuple[str, str, float]], precision: Precision
) -> None:
    """Score descending in the given precision, then doc id descending by code point."""
    qids = pd.Series([r[0] for r in rows], dtype=str)
    docs = pd.Series([r[1] for r in rows], dtype=str)
    scores = np.array([r[2] for r in rows], dtype=np.float64)
    codes, _ = pd.factorize(qids)
    order = rank_order(codes, scores, docs, precision)
    cast = np.float32 if precision == "float32" else np.float64
    expected = sorted(range(len(rows)), key=lambda i: (codes[i], -cast(scores[i]), _neg(docs[i])))
    assert [(codes[i], docs[i]) for i in order] == [(codes[i], docs[i]) for i in expected]


def _neg(text: str) -> tuple[int, ...]:
    """A key that sorts strings in descending code-point order (shorter prefix last)."""
    return (*(-ord(c) for c in text), 1)
