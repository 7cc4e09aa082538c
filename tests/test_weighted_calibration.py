"""Weighting a stratified sample back: the unweighted agreement is biased, the weighted is not.

A population of LLM judgments where people agree with the LLM much more often on grade 0 (the
bulk of the pairs) than on grades 1-3. A stratified sample with equal allocation over-represents
grades 1-3, so its raw agreement understates the population's; weighting each pair by 1/pi from
the manifest recovers the population figure.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from calibration.spotcheck.manifest import (
    build_manifest,
    read_manifest,
    sample_weights,
    write_manifest,
)
from calibration.spotcheck.sampling import draw_sample
from calibration.stats.agreement import agreement
from grader.models import Judgment
from tests.helpers.fill_data import DATA as SHARED_DL2019
from tests.helpers.sampling import make_judgment

SHARES = {0: 0.70, 1: 0.15, 2: 0.10, 3: 0.05}
AGREE = {0: 0.95, 1: 0.45, 2: 0.50, 3: 0.60}


def _world(
    size: int, rng: np.random.Generator
) -> tuple[list[Judgment], dict[tuple[str, str], int]]:
    """LLM judgments and the grade a person would give each pair (agreeing with AGREE[g])."""
    llm = rng.choice(4, size=size, p=[SHARES[g] for g in range(4)])
    human = llm.copy()
    for i, g in enumerate(llm):
        if rng.random() > AGREE[int(g)]:
            human[i] = (
                int(np.clip(g + rng.choice([-1, 1]), 0, 3))
                if g not in (0, 3)
                else (1 if g == 0 else 2)
            )
    judgments = [make_judgment(f"q{i % 50}", f"d{i}", int(g)) for i, g in enumerate(llm)]
    truth = {(j.query_id, j.doc_id): int(h) for j, h in zip(judgments, human, strict=True)}
    return judgments, truth


@pytest.mark.slow
@pytest.mark.parametrize(
    "seed", [1, *(pytest.param(s, marks=pytest.mark.slow) for s in range(2, 6))]
)
def test_weighted_agreement_matches_the_population_and_unweighted_does_not(
    tmp_path: Path, seed: int
) -> None:
    rng = np.random.default_rng(100 + seed)
    judgments, truth = _world(20_000, rng)
    llm_all = np.array([j.grade for j in judgments])
    human_all = np.array([truth[(j.query_id, j.doc_id)] for j in judgments])
    population = agreement(human_all, llm_all)

    draw = draw_sample(judgments, strategy="stratified", allocation="equal", n=600, seed=seed)
    path = tmp_path / "sample.manifest.json"
    write_manifest(path, build_manifest(draw))
    manifest = read_manifest(path)

    llm_of = {(j.query_id, j.doc_id): j.grade for j in judgments}
    pairs = [(p.query_id, p.doc_id) for p in draw.pairs]
    frame = pd.DataFrame(
        {
            "query_id": [q for q, _ in pairs],
            "doc_id": [d for _, d in pairs],
            "human": [truth[p] for p in pairs],
            "llm": [llm_of[p] for p in pairs],
        }
    ).sample(frac=1.0, random_state=seed)  # grade files come in any order
    weights = sample_weights(manifest, frame)

    raw = agreement(frame["human"], frame["llm"])
    weighted = agreement(frame["human"], frame["llm"], weights=weights)
    for key, bias_at_least, close_within in (
        ("exact_agreement", 0.12, 0.04),
        ("cohen_kappa", 0.06, 0.05),
    ):
        assert abs(raw[key] - population[key]) > bias_at_least, key
        assert abs(weighted[key] - population[key]) < close_within, key
        assert abs(weighted[key] - population[key]) < abs(raw[key] - population[key]) / 2, key

    # Horvitz-Thompson by hand: the weighted total of agreeing pairs estimates the population's
    agree = (frame["human"] == frame["llm"]).to_numpy()
    ht_total = float((weights * agree).sum())
    true_total = float((human_all == llm_all).sum())
    assert weights.sum() == pytest.approx(len(judgments))
    assert abs(ht_total - true_total) / true_total < 0.05


DATA = SHARED_DL2019


@pytest.mark.slow
@pytest.mark.skipif(not DATA.is_dir(), reason="TREC DL 2019 data is not present")
@pytest.mark.parametrize(
    "label_set",
    ["dl2019_test_4prompts_llama70b", "dl2019_test_baseline_relavance_qrel_prompt_order_3210"],
)
def test_on_trec_dl_2019_the_weighted_estimate_is_unbiased_over_seeds(label_set: str) -> None:
    """Real LLM labels vs the 9,260 NIST grades: over 30 stratified samples of 400, the raw
    quadratic kappa is off in one direction (these judges agree more on grades 2-3, which equal
    allocation over-samples) while the weighted mean lands on the full-set value."""
    from grader.io.trec import read_qrels

    human = read_qrels(DATA / "2019qrels-pass.txt")
    llm = read_qrels(DATA / "llm-labels" / f"{label_set}.txt")
    both = human.merge(llm, on=["query_id", "doc_id"], suffixes=("_h", "_l"))
    key = "weighted_kappa_quadratic"
    truth = agreement(both["grade_h"], both["grade_l"])[key]
    judgments = [
        make_judgment(q, d, int(g))
        for q, d, g in zip(both["query_id"], both["doc_id"], both["grade_l"], strict=True)
    ]
    row = {(q, d): i for i, (q, d) in enumerate(zip(both["query_id"], both["doc_id"], strict=True))}
    raw_errors, weighted_errors = [], []
    for seed in range(30):
        draw = draw_sample(judgments, strategy="stratified", n=400, seed=seed)
        sample = both.iloc[[row[(p.query_id, p.doc_id)] for p in draw.pairs]]
        weights = np.array([1 / p.inclusion_probability for p in draw.pairs])
        raw_errors.append(agreement(sample["grade_h"], sample["grade_l"])[key] - truth)
        weighted = agreement(sample["grade_h"], sample["grade_l"], weights=weights)[key]
        weighted_errors.append(weighted - truth)
    assert np.mean(raw_errors) > 0.05
    assert abs(np.mean(weighted_errors)) < 0.025
