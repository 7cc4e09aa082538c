"""The specification's worked examples, measure names, and hand-computed edge cases."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from grader.errors import InputError
from grader.metrics import (
    average_precision,
    dcg,
    evaluate,
    judged_at_k,
    mean_scores,
    mrr,
    ndcg,
    parse_measure,
    precision_at_k,
    r_precision,
    recall_at_k,
    reciprocal_rank,
    success_at_k,
)

REL, NON = 3, 0


def test_mrr_of_the_three_example_queries_is_0_611_at_threshold_2() -> None:
    lists = [[0, 3, 1], [3, 0, 0], [0, 0, 3]]
    assert mrr(lists, threshold=2) == pytest.approx((1 / 2 + 1 + 1 / 3) / 3)
    assert round(mrr(lists, threshold=2), 3) == 0.611
    assert recall_at_k([0, 0, 3], 2, n_relevant=1, threshold=2) == 0.0


def test_mrr_at_k_looks_only_at_the_top_k() -> None:
    # the third query's first relevant document is at rank 3: RR@2 is 0 for it
    lists = [[0, 3, 1], [3, 0, 0], [0, 0, 3]]
    assert mrr(lists, threshold=2, k=2) == pytest.approx((1 / 2 + 1 + 0) / 3)
    assert mrr(lists, threshold=2, k=1) == pytest.approx(1 / 3)
    assert mrr(lists, threshold=1, k=1) == pytest.approx(1 / 3)
    assert mrr(lists, threshold=2, k=10) == mrr(lists, threshold=2)  # past the end: all of it


def test_threshold_changes_what_counts_as_relevant() -> None:
    # at threshold 1 the grade-1 document of the first list is relevant too, but comes later
    assert reciprocal_rank([0, 3, 1], threshold=1) == 0.5
    assert reciprocal_rank([1, 3], threshold=1) == 1.0
    assert reciprocal_rank([1, 3], threshold=3) == 0.5


def test_ndcg_of_3012_against_its_own_ideal_is_0_916() -> None:
    rels = [3, 0, 1, 2]
    expected = (3 + 1 / math.log2(4) + 2 / math.log2(5)) / (3 + 2 / math.log2(3) + 1 / math.log2(4))
    assert ndcg(rels, rels) == pytest.approx(expected)
    assert round(ndcg(rels, rels), 3) == 0.916


def test_rag_example_recall_precision_mrr_and_ndcg_with_the_missed_documents() -> None:
    results = [REL, NON, REL, REL, NON]
    all_judged = [REL] * 5  # five relevant documents exist; the run found three
    assert recall_at_k(results, 5, n_relevant=5) == pytest.approx(0.6)
    assert precision_at_k(results, 5) == pytest.approx(0.6)
    assert mrr([results]) == 1.0
    # the misuse: ideal built from the returned list hides the two missed documents
    assert ndcg(results, results) < 1.0
    assert ndcg([REL, REL, REL], [REL, REL, REL]) == 1.0
    honest = ndcg(results, all_judged)
    assert honest < ndcg(results, results) < 1.0


def test_rag_example_through_the_vectorised_evaluator() -> None:
    qrels = pd.DataFrame(
        {"query_id": ["q"] * 7, "doc_id": list("abcdefg"), "grade": [3, 3, 3, 3, 3, 0, 0]}
    )
    run = pd.DataFrame(
        {"query_id": ["q"] * 5, "doc_id": list("afbgc"), "score": [5.0, 4.0, 3.0, 2.0, 1.0]}
    )
    means = mean_scores(evaluate(qrels, run, ["R@5", "P@5", "RR", "nDCG", "Judged@5"]))
    values = dict(zip(means["measure"], means["value"], strict=True))
    assert values["R(rel=2)@5"] == pytest.approx(0.6)
    assert values["P(rel=2)@5"] == pytest.approx(0.6)
    assert values["RR(rel=2)"] == 1.0
    assert values["nDCG"] == pytest.approx(ndcg([3, 0, 3, 0, 3], [3] * 5 + [0, 0]))
    assert values["nDCG"] < 1.0
    assert values["Judged@5"] == 1.0


@pytest.mark.parametrize(
    ("text", "printed"),
    [
        ("nDCG@10", "nDCG@10"),
        ("nDCG", "nDCG"),
        ("RR", "RR(rel=2)"),
        ("RR@10", "RR(rel=2)@10"),
        ("P@10", "P(rel=2)@10"),
        ("R@100", "R(rel=2)@100"),
        ("AP", "AP(rel=2)"),
        ("RPrec", "Rprec(rel=2)"),
        ("Rprec", "Rprec(rel=1)"),  # trec_eval's and ir_measures' name: their rel=1
        ("Success@10", "Success(rel=2)@10"),
        ("Judged@10", "Judged@10"),
        ("P(rel=2)@10", "P(rel=2)@10"),
        ("P(rel=3)@10", "P(rel=3)@10"),
        ("nDCG(gain=exp)@10", "nDCG(gain=exp)@10"),
        ("nDCG(gain=linear)@10", "nDCG@10"),
        ("MRR@10", "RR(rel=2)@10"),
        ("map", "AP(rel=1)"),  # trec_eval's names: trec_eval's level 1
        ("ndcg_cut_10", "nDCG@10"),
        ("P.5", "P(rel=1)@5"),
        ("recall_100", "R(rel=1)@100"),
        ("recip_rank", "RR(rel=1)"),
    ],
)
def test_names_parse_and_print_back_with_the_threshold_explicit(text: str, printed: str) -> None:
    measure = parse_measure(text)
    assert str(measure) == printed
    assert parse_measure(str(measure)) == measure
    assert str(parse_measure(printed)) == printed


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("nDCG(rel=2)@10", "takes no threshold"),
        ("Judged(rel=1)@10", "takes no threshold"),
        ("P", "needs a cutoff"),
        ("P@0", "positive integer"),
        ("RR(rel=0)", "not a grade threshold"),
        ("RR(rel=x)", "not a grade threshold"),
        ("RR(gain=exp)", "takes no gain"),
        ("nDCG(gain=square)", "unknown gain"),
        ("Rprec@10", "no @k cutoff"),
        ("infAP", "unknown measure"),
        ("P(foo=1)@5", "unknown parameter"),
    ],
)
def test_bad_names_raise_an_input_error_that_says_why(text: str, why: str) -> None:
    with pytest.raises(InputError, match=why):
        parse_measure(text)


def test_k_past_the_end_of_the_list() -> None:
    assert precision_at_k([3, 3], 10) == 0.2  # always divided by k
    assert recall_at_k([3, 3], 10, n_relevant=4) == 0.5
    assert success_at_k([0, 3], 10) == 1.0
    assert judged_at_k([3, None], 10) == 0.1
    assert ndcg([3], [3], k=10) == 1.0


def test_no_relevant_documents_and_empty_lists_score_zero() -> None:
    assert reciprocal_rank([]) == 0.0
    assert recall_at_k([0, 1], 5, n_relevant=0) == 0.0
    assert average_precision([0, 1], n_relevant=0) == 0.0
    assert r_precision([0, 1], n_relevant=0) == 0.0
    assert ndcg([0, 0], [0, 0]) == 0.0
    assert judged_at_k([]) == 0.0
    with pytest.raises(ValueError):
        mrr([])


def test_average_precision_and_rprec_by_hand() -> None:
    rels = [3, 0, 2, 0, 1]
    # relevant (>=2) at ranks 1 and 3; three relevant judged in all
    assert average_precision(rels, n_relevant=3) == pytest.approx((1 / 1 + 2 / 3) / 3)
    assert average_precision(rels, n_relevant=3, k=2) == pytest.approx(1 / 3)
    assert r_precision(rels, n_relevant=3) == pytest.approx(2 / 3)


def test_exponential_gain() -> None:
    assert dcg([3, 2], gain="exp") == pytest.approx(7 + 3 / math.log2(3))
    assert ndcg([2, 3], [3, 2], gain="exp") == pytest.approx(
        (3 + 7 / math.log2(3)) / (7 + 3 / math.log2(3))
    )


def test_unjudged_documents_are_not_relevant_and_gain_nothing() -> None:
    assert reciprocal_rank([None, 3]) == 0.5
    assert dcg([None, 3]) == pytest.approx(3 / math.log2(3))


def test_missing_queries_count_as_zero_or_are_skipped() -> None:
    qrels = pd.DataFrame({"query_id": ["a", "b"], "doc_id": ["d", "d"], "grade": [3, 3]})
    run = pd.DataFrame({"query_id": ["a", "z"], "doc_id": ["d", "d"], "score": [1.0, 1.0]})
    zero = evaluate(qrels, run, ["RR"])
    assert mean_scores(zero)["value"].iat[0] == 0.5
    assert zero.attrs["missing"] == ["b"]
    assert zero.attrs["unjudged_queries"] == ["z"]
    skip = evaluate(qrels, run, ["RR"], missing="skip")
    assert mean_scores(skip)["value"].iat[0] == 1.0
    assert list(skip["query_id"]) == ["a"]


def test_float32_ties_break_by_doc_id_descending_unless_float64() -> None:
    qrels = pd.DataFrame({"query_id": ["q"], "doc_id": ["a"], "grade": [3]})
    # 1.0 and 1.0 + 1e-9 are equal in float32: a tie, broken by doc id descending ("b" first)
    run = pd.DataFrame({"query_id": ["q", "q"], "doc_id": ["a", "b"], "score": [1.0 + 1e-9, 1.0]})
    assert evaluate(qrels, run, ["RR"])["value"].iat[0] == 0.5
    assert evaluate(qrels, run, ["RR"], precision="float64")["value"].iat[0] == 1.0


def test_qrels_frames_with_missing_grades_or_repeats_are_refused() -> None:
    run = pd.DataFrame({"query_id": ["q"], "doc_id": ["a"], "score": [1.0]})
    failed = pd.DataFrame({"query_id": ["q", "q"], "doc_id": ["a", "b"], "grade": [3, None]})
    with pytest.raises(InputError, match="not an integer"):
        evaluate(failed, run, ["RR"])
    twice = pd.DataFrame({"query_id": ["q", "q"], "doc_id": ["a", "a"], "grade": [3, 0]})
    with pytest.raises(InputError, match="twice"):
        evaluate(twice, run, ["RR"])
