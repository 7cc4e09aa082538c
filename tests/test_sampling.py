"""Spot-check sampling: exact inclusion probabilities, reproducibility, allocation, errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calibration.spotcheck.sampling import allocate, draw_sample, plan_design, sample_size
from grader.errors import InputError
from tests.helpers.hypothesis_scale import examples
from tests.helpers.params import quick_first
from tests.helpers.sampling import make_judgment, population

STRATEGY_CASES = ["uniform", "stratified", "low", "query-balanced", "uncertainty"]


@pytest.mark.parametrize("strategy", STRATEGY_CASES)
def test_every_strategy_draws_exactly_n_distinct_pairs_with_pi_in_range(strategy: str) -> None:
    pop = population({0: 50, 1: 30, 2: 15, 3: 5}, with_distribution=True)
    draw = draw_sample(pop, strategy=strategy, n=20, seed=3)
    pairs = [(p.query_id, p.doc_id) for p in draw.pairs]
    assert len(pairs) == 20 and len(set(pairs)) == 20
    assert all(0 < p.inclusion_probability <= 1 for p in draw.pairs)
    design = plan_design(pop, strategy=strategy, size=20)
    assert design.pi.sum() == pytest.approx(20)
    assert (design.pi > 0).all()


@pytest.mark.slow
@pytest.mark.parametrize(
    "strategy", quick_first(["stratified", "low", "query-balanced", "uncertainty"])
)
def test_empirical_inclusion_frequency_matches_the_recorded_pi(strategy: str) -> None:
    pop = population({0: 12, 1: 8, 2: 6, 3: 2}, queries=3, with_distribution=True)
    design = plan_design(pop, strategy=strategy, size=7)
    pi = {(j.query_id, j.doc_id): float(p) for j, p in zip(pop, design.pi, strict=True)}
    hits = dict.fromkeys(pi, 0)
    runs = 2000
    for seed in range(runs):
        for pair in draw_sample(pop, strategy=strategy, n=7, seed=seed).pairs:
            hits[(pair.query_id, pair.doc_id)] += 1
            assert pair.inclusion_probability == pytest.approx(pi[(pair.query_id, pair.doc_id)])
    for key, p in pi.items():
        se = np.sqrt(p * (1 - p) / runs)
        assert abs(hits[key] / runs - p) <= 4 * se + 1e-9, key


def test_same_seed_same_sample_other_seed_other_sample() -> None:
    pop = population({0: 40, 1: 40, 2: 40, 3: 40})
    a = draw_sample(pop, strategy="stratified", n=16, seed=7)
    b = draw_sample(pop, strategy="stratified", n=16, seed=7)
    c = draw_sample(pop, strategy="stratified", n=16, seed=8)
    assert [(p.query_id, p.doc_id) for p in a.pairs] == [(p.query_id, p.doc_id) for p in b.pairs]
    assert {p.doc_id for p in a.pairs} != {p.doc_id for p in c.pairs}


def test_equal_allocation_gives_each_grade_the_same_count_and_small_strata_all() -> None:
    pop = population({0: 100, 1: 50, 2: 20, 3: 2})
    draw = draw_sample(pop, strategy="stratified", allocation="equal", n=32, seed=1)
    counts = {s: sum(p.stratum == s for p in draw.pairs) for s in draw.strata}
    # grade 3 has only 2 pairs: both are taken, the other 30 are split 10/10/10
    assert counts == {"grade=0": 10, "grade=1": 10, "grade=2": 10, "grade=3": 2}
    pis = {p.stratum: p.inclusion_probability for p in draw.pairs}
    assert pis == pytest.approx({"grade=0": 0.1, "grade=1": 0.2, "grade=2": 0.5, "grade=3": 1.0})


def test_proportional_allocation_is_uniform_pi() -> None:
    pop = population({0: 60, 1: 20, 2: 15, 3: 5})
    draw = draw_sample(pop, strategy="stratified", allocation="proportional", n=20, seed=2)
    assert [p.inclusion_probability for p in draw.pairs] == pytest.approx([0.2] * 20)
    counts = {s: sum(p.stratum == s for p in draw.pairs) for s in draw.strata}
    assert counts == {"grade=0": 12, "grade=1": 4, "grade=2": 3, "grade=3": 1}


def test_low_strategy_puts_its_share_on_grades_0_and_1_but_keeps_the_rest_reachable() -> None:
    pop = population({0: 100, 1: 100, 2: 100, 3: 100})
    draw = draw_sample(pop, strategy="low", n=50, seed=4, low_share=0.8)
    low = sum(p.stratum == "grades 0-1" for p in draw.pairs)
    assert low == 40
    assert {p.stratum for p in draw.pairs} == {"grades 0-1", "grades 2-3"}


def test_query_balanced_gives_a_small_query_as_many_as_a_big_one() -> None:
    pop = [make_judgment("big", f"b{i}", i % 4) for i in range(200)]
    pop += [make_judgment("small", f"s{i}", i % 4) for i in range(10)]
    draw = draw_sample(pop, strategy="query-balanced", n=20, seed=0)
    per_query = {q: sum(p.query_id == q for p in draw.pairs) for q in ("big", "small")}
    assert per_query == {"big": 10, "small": 10}


def test_uncertainty_draws_unsure_pairs_more_often_but_every_pair_can_be_drawn() -> None:
    sure = [make_judgment("q", f"s{i}", 2, distribution=[0, 0, 1.0, 0]) for i in range(50)]
    unsure = [make_judgment("q", f"u{i}", 1, distribution=[0.3, 0.4, 0.3, 0.0]) for i in range(50)]
    design = plan_design(sure + unsure, strategy="uncertainty", size=10, floor=0.05)
    assert design.uncertainty_source == "1 - confidence"
    pi_sure, pi_unsure = design.pi[0], design.pi[-1]
    assert pi_sure > 0
    assert pi_unsure / pi_sure == pytest.approx((0.6 + 0.05) / 0.05)


def test_uncertainty_falls_back_to_ensemble_disagreement() -> None:
    pop = [make_judgment("q", f"d{i}", 1, disagreement=float(i % 3)) for i in range(30)]
    design = plan_design(pop, strategy="uncertainty", size=5)
    assert design.uncertainty_source == "disagreement"
    assert design.pi[2] > design.pi[1] > design.pi[0] > 0


def test_uncertainty_without_distribution_or_disagreement_says_what_to_do() -> None:
    pop = population({0: 5, 1: 5})
    with pytest.raises(InputError, match="--strategy stratified"):
        draw_sample(pop, strategy="uncertainty", n=3)


def test_a_failed_judgment_or_a_duplicate_pair_is_refused() -> None:
    with pytest.raises(InputError, match="failed judgment is no grade"):
        draw_sample([make_judgment("q", "d", None)], strategy="uniform", n=1)
    twice = [make_judgment("q", "d", 1), make_judgment("q", "d", 2)]
    with pytest.raises(InputError, match="graded twice"):
        draw_sample(twice, strategy="uniform", n=1)


def test_sample_size_from_fraction_and_bounds() -> None:
    assert sample_size(1000, fraction=0.1) == 100
    assert sample_size(5, fraction=0.01) == 1
    with pytest.raises(InputError, match="only 5 eligible"):
        sample_size(5, n=6)
    with pytest.raises(InputError, match="exactly one"):
        sample_size(5, n=2, fraction=0.5)


def test_sample_order_is_not_sorted_by_grade() -> None:
    pop = population({0: 100, 1: 100, 2: 100, 3: 100})
    draw = draw_sample(pop, strategy="stratified", n=40, seed=5)
    strata = [p.stratum for p in draw.pairs]
    assert strata != sorted(strata) and strata != sorted(strata, reverse=True)


def test_allocate_water_fills_under_caps() -> None:
    out = allocate(np.ones(3), np.array([1.0, 100.0, 100.0]), 21)
    assert out.tolist() == pytest.approx([1.0, 10.0, 10.0])


@settings(max_examples=examples(60), deadline=None)
@given(
    counts=st.lists(st.integers(0, 30), min_size=4, max_size=4).filter(lambda c: sum(c) > 0),
    share=st.floats(0.01, 1.0),
    strategy=st.sampled_from(STRATEGY_CASES),
    allocation=st.sampled_from(["equal", "proportional"]),
    seed=st.integers(0, 10_000),
)
def test_any_design_has_pi_in_range_summing_to_n_and_draws_exactly_n(
    counts: list[int], share: float, strategy: str, allocation: str, seed: int
) -> None:
    pop = population(dict(enumerate(counts)), queries=3, seed=seed, with_distribution=True)
    size = max(1, round(share * len(pop)))
    design = plan_design(pop, strategy=strategy, size=size, allocation=allocation)
    assert ((design.pi > 0) & (design.pi <= 1)).all()
    assert design.pi.sum() == pytest.approx(size)
    draw = draw_sample(pop, strategy=strategy, n=size, allocation=allocation, seed=seed)
    assert len({(p.query_id, p.doc_id) for p in draw.pairs}) == size


@pytest.mark.slow
def test_whole_queries_takes_every_pair_of_m_random_queries_with_pi_m_over_q() -> None:
    pop = population({0: 30, 1: 20, 2: 10, 3: 4}, queries=8, with_distribution=True)
    design = plan_design(pop, strategy="whole-queries", size=16)
    assert design.queries_drawn == 2  # round(16 * 8 / 64)
    assert np.allclose(design.pi, 2 / 8)
    by_query: dict[str, int] = {}
    for j in pop:
        by_query[j.query_id] = by_query.get(j.query_id, 0) + 1
    hits = dict.fromkeys(by_query, 0)
    runs = 2000
    for seed in range(runs):
        draw = draw_sample(pop, strategy="whole-queries", n=16, seed=seed)
        drawn: dict[str, int] = {}
        for p in draw.pairs:
            drawn[p.query_id] = drawn.get(p.query_id, 0) + 1
            assert p.inclusion_probability == pytest.approx(0.25)
        assert len(drawn) == 2
        assert all(drawn[q] == by_query[q] for q in drawn)  # whole queries, nothing partial
        for q in drawn:
            hits[q] += 1
    for q, count in hits.items():
        se = np.sqrt(0.25 * 0.75 / runs)
        assert abs(count / runs - 0.25) <= 4 * se, q
