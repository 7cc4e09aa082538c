"""Conformance with trec_eval (via pytrec_eval): every measure equal to 1e-9, per query and mean.

Random qrels and runs cover score ties (also scores equal only in float32), queries without
relevant documents, queries judged but not run, run queries without judgments, k past the end
of the ranking and thresholds 1, 2 and 3. Each case also checks the list functions on the same
graded lists, so both layers of the core are held to trec_eval.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import pytrec_eval  # a dev dependency: missing, this suite must fail, never skip

from grader.io.trec import read_qrels, read_run
from grader.metrics import (
    average_precision,
    evaluate,
    judged_at_k,
    mean_scores,
    ndcg,
    precision_at_k,
    r_precision,
    recall_at_k,
    reciprocal_rank,
    success_at_k,
)
from tests.helpers.ir_measures_ref import Qrels, Run, frames
from tests.helpers.params import quick_first
from tests.helpers.trec import DL2019, trec_order, write_run

CUTOFFS = (1, 3, 5, 10, 20)
THRESHOLDS = (1, 2, 3)
TOL = 1e-9


def random_case(
    rng: np.random.Generator, n_queries: int, grades: tuple[int, int] = (0, 3)
) -> tuple[Qrels, Run]:
    """Qrels (grades drawn from `grades`, both ends included) and a run with the awkward cases
    trec_eval users meet."""
    low, high = grades
    qrels: Qrels = {}
    run: Run = {}
    for q in range(n_queries):
        qid = f"q{q}"
        n_judged = int(rng.integers(1, 12))
        no_relevant = rng.random() < 0.15
        drawn = rng.integers(low, high + 1, n_judged)
        judged = np.minimum(drawn, 0) if no_relevant else drawn
        docs = [f"d{q}_{i}" for i in range(n_judged)]
        qrels[qid] = {d: int(g) for d, g in zip(docs, judged, strict=True)}
        if rng.random() < 0.15:
            continue  # judged, not run
        pool = docs + [f"u{q}_{i}" for i in range(int(rng.integers(0, 10)))]
        size = int(rng.integers(1, len(pool) + 1))
        picked = rng.choice(pool, size=size, replace=False)
        style = rng.random()
        if style < 0.3:
            scores = rng.integers(0, 3, size=size).astype(float)  # many exact ties
        elif style < 0.5:
            # distinct in float64, equal in float32: ties for trec_eval 9
            scores = 1.0 + rng.integers(0, 3, size=size) * 1e-9
        else:
            scores = rng.normal(size=size)
        run[qid] = {str(d): float(s) for d, s in zip(picked, scores, strict=True)}
    for extra in range(int(rng.integers(0, 3))):
        run[f"x{extra}"] = {"d0_0": 1.0, "zz": 0.5}  # not in the qrels: ignored
    return qrels, run


def trec_eval_values(
    qrels: Qrels, run: Run, thresholds: tuple[int, ...] = THRESHOLDS
) -> dict[tuple[str, str], float]:
    """{(query, measure name as relgrade prints it): value} computed by pytrec_eval."""
    cut = ",".join(str(k) for k in CUTOFFS)
    out: dict[tuple[str, str], float] = {}
    for t in thresholds:
        names = {f"P.{cut}", f"recall.{cut}", f"success.{cut}", f"map_cut.{cut}"}
        names |= {"recip_rank", "map", "Rprec", f"ndcg_cut.{cut}", "ndcg"}
        res = pytrec_eval.RelevanceEvaluator(qrels, names, relevance_level=t).evaluate(run)
        for qid, vals in res.items():
            out[qid, f"RR(rel={t})"] = vals["recip_rank"]
            out[qid, f"AP(rel={t})"] = vals["map"]
            out[qid, f"Rprec(rel={t})"] = vals["Rprec"]
            out[qid, "nDCG"] = vals["ndcg"]
            for k in CUTOFFS:
                out[qid, f"P(rel={t})@{k}"] = vals[f"P_{k}"]
                out[qid, f"R(rel={t})@{k}"] = vals[f"recall_{k}"]
                out[qid, f"Success(rel={t})@{k}"] = vals[f"success_{k}"]
                out[qid, f"AP(rel={t})@{k}"] = vals[f"map_cut_{k}"]
                out[qid, f"nDCG@{k}"] = vals[f"ndcg_cut_{k}"]
        # trec_eval has no cutoff for recip_rank: RR@k is recip_rank on the run cut to its top k
        for k in CUTOFFS:
            top_k = {q: {d: docs[d] for d in trec_order(docs)[:k]} for q, docs in run.items()}
            cut_res = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}, relevance_level=t)
            for qid, vals in cut_res.evaluate(top_k).items():
                out[qid, f"RR(rel={t})@{k}"] = vals["recip_rank"]
    return out


def list_values(qrels: Qrels, run: Run) -> dict[tuple[str, str], float]:
    """The same measures from the list functions on each query's graded list."""
    out: dict[tuple[str, str], float] = {}
    for qid, judged in qrels.items():
        if qid not in run:
            continue
        rels: list[int | None] = [judged.get(d) for d in trec_order(run[qid])]
        ideal = list(judged.values())
        out[qid, "nDCG"] = ndcg(rels, ideal)
        out[qid, "nDCG(gain=exp)"] = ndcg(rels, ideal, gain="exp")
        out[qid, "Judged"] = judged_at_k(rels)
        for t in THRESHOLDS:
            n_rel = sum(1 for g in ideal if g >= t)
            out[qid, f"RR(rel={t})"] = reciprocal_rank(rels, t)
            out[qid, f"AP(rel={t})"] = average_precision(rels, n_rel, t)
            out[qid, f"Rprec(rel={t})"] = r_precision(rels, n_rel, t)
            for k in CUTOFFS:
                out[qid, f"RR(rel={t})@{k}"] = reciprocal_rank(rels, t, k)
                out[qid, f"P(rel={t})@{k}"] = precision_at_k(rels, k, t)
                out[qid, f"R(rel={t})@{k}"] = recall_at_k(rels, k, n_rel, t)
                out[qid, f"Success(rel={t})@{k}"] = success_at_k(rels, k, t)
                out[qid, f"AP(rel={t})@{k}"] = average_precision(rels, n_rel, t, k)
        for k in CUTOFFS:
            out[qid, f"nDCG@{k}"] = ndcg(rels, ideal, k)
            out[qid, f"nDCG(gain=exp)@{k}"] = ndcg(rels, ideal, k, gain="exp")
            out[qid, f"Judged@{k}"] = judged_at_k(rels, k)
    return out


ALL_MEASURES = sorted({m for (_, m) in list_values({"q": {"d": 1}}, {"q": {"d": 1.0}})})


def relgrade_values(per_query: pd.DataFrame) -> dict[tuple[str, str], float]:
    return {
        (str(q), str(m)): float(v)
        for q, m, v in per_query[["query_id", "measure", "value"]].itertuples(index=False)
    }


def assert_close(ours: dict[tuple[str, str], float], ref: dict[tuple[str, str], float]) -> None:
    for key, expected in ref.items():
        assert key in ours, f"relgrade has no value for {key}"
        assert abs(ours[key] - expected) <= TOL, f"{key}: relgrade {ours[key]} != {expected}"


@pytest.mark.slow
@pytest.mark.parametrize("seed", quick_first(range(12), 3))
def test_random_qrels_and_runs_match_trec_eval(seed: int) -> None:
    rng = np.random.default_rng(seed)
    qrels, run = random_case(rng, n_queries=40)
    q, r = frames(qrels, run)
    skip = evaluate(q, r, ALL_MEASURES, missing="skip")
    ours = relgrade_values(skip)
    ref = trec_eval_values(qrels, run)
    # the same queries as trec_eval: judged and run, never run-only queries
    assert {k[0] for k in ref} == set(skip["query_id"])
    assert_close(ours, ref)
    # measures that all have a cutoff take the top-k path of the evaluator: same numbers
    cut_only = [m for m in ALL_MEASURES if "@" in m and int(m.split("@")[1]) <= 5]
    assert_close(
        relgrade_values(evaluate(q, r, cut_only, missing="skip")),
        {key: v for key, v in ref.items() if key[1] in cut_only},
    )
    # the list functions agree with trec_eval and with the vectorised kernels
    lists = list_values(qrels, run)
    assert_close(lists, ref)
    assert_close(ours, lists)
    # means: trec_eval's default (skip) and trec_eval -c (zero: missing queries count as 0)
    means = mean_scores(skip).set_index("measure")["value"]
    zero = mean_scores(evaluate(q, r, ALL_MEASURES)).set_index("measure")["value"]
    for measure in {m for (_, m) in ref}:
        vals = [v for (_, m), v in ref.items() if m == measure]
        assert abs(means[measure] - np.mean(vals)) <= TOL
        assert abs(zero[measure] - sum(vals) / len(qrels)) <= TOL


def test_empty_run_scores_zero_or_nothing() -> None:
    qrels, _ = random_case(np.random.default_rng(99), n_queries=5)
    q, _r = frames(qrels, {})
    empty = pd.DataFrame({"query_id": [], "doc_id": [], "score": []})
    zero = evaluate(q, empty, ["nDCG@10", "RR", "P@5"])
    assert len(zero) == 5 * 3 and (zero["value"] == 0).all()
    assert sorted(zero.attrs["missing"]) == sorted(qrels)
    skip = evaluate(q, empty, ["nDCG@10"], missing="skip")
    assert skip.empty
    assert np.isnan(mean_scores(skip).set_index("measure")["value"]["nDCG@10"])
    assert pytrec_eval.RelevanceEvaluator(qrels, {"ndcg"}).evaluate({}) == {}


def test_files_round_trip_through_trec_readers(tmp_path: Path) -> None:
    """Files written and read back rank exactly like trec_eval reading the same numbers."""
    qrels, run = random_case(np.random.default_rng(7), n_queries=30)
    q, r = frames(qrels, run)
    write_run(tmp_path / "run.txt", r, "test")
    (tmp_path / "qrels.txt").write_text(
        "".join(f"{a} 0 {b} {c}\n" for a, b, c in q.itertuples(index=False))
    )
    per_query = evaluate(
        read_qrels(tmp_path / "qrels.txt"),
        read_run(tmp_path / "run.txt"),
        ALL_MEASURES,
        missing="skip",
    )
    assert_close(relgrade_values(per_query), trec_eval_values(qrels, run))


@pytest.mark.skipif(not (DL2019 / "2019qrels-pass.txt").exists(), reason="TREC DL 2019 absent")
@pytest.mark.slow
def test_trec_dl_2019_qrels_with_synthesised_runs(tmp_path: Path) -> None:
    qrels_frame = read_qrels(DL2019 / "2019qrels-pass.txt")
    qrels: Qrels = {}
    for qid, did, grade in qrels_frame.itertuples(index=False):
        qrels.setdefault(qid, {})[did] = int(grade)
    rng = np.random.default_rng(2019)
    run: Run = {}
    for i, (qid, judged) in enumerate(qrels.items()):
        if i % 10 == 0:
            continue  # some judged queries left out of the run
        docs = list(judged)
        picked = list(rng.choice(docs, size=min(len(docs), 60), replace=False))
        picked += [f"unjudged{j}" for j in range(40)]
        scores = np.round(rng.normal(size=len(picked)), 2)  # rounding makes ties
        run[qid] = {str(d): float(s) for d, s in zip(picked, scores, strict=True)}
    _q, r = frames(qrels, run)
    write_run(tmp_path / "dl.run", r, "synth")
    per_query = evaluate(qrels_frame, read_run(tmp_path / "dl.run"), ALL_MEASURES, missing="skip")
    assert_close(relgrade_values(per_query), trec_eval_values(qrels, run))


def as_trec_eval_reads(qrels: Qrels) -> Qrels:
    """The qrels with negative grades written as 0, for pytrec_eval.

    trec_eval (form_res_rels.c) reads a negative grade as "in the pool, unjudged": never
    relevant, not counted in any relevance level, and no nDCG gain (its default gain table holds
    levels 0..max only). For every measure compared here that is exactly grade 0. pytrec_eval
    itself must not see negative grades: on a few hundred of them it crashes (segfault).
    """
    return {q: {d: max(g, 0) for d, g in docs.items()} for q, docs in qrels.items()}


def exp_gain_values(qrels: Qrels, run: Run) -> dict[tuple[str, str], float]:
    """nDCG(gain=exp) from pytrec_eval: linear nDCG over grades mapped to 2^g - 1.

    A grade <= 0 gains 0, as trec_eval gives a negative grade no gain, rather than the negative
    2^g - 1: that is what relgrade's exp gain does.
    """
    mapped = {q: {d: 2 ** max(g, 0) - 1 for d, g in docs.items()} for q, docs in qrels.items()}
    cut = ",".join(str(k) for k in CUTOFFS)
    res = pytrec_eval.RelevanceEvaluator(mapped, {"ndcg", f"ndcg_cut.{cut}"}).evaluate(run)
    out: dict[tuple[str, str], float] = {}
    for qid, vals in res.items():
        out[qid, "nDCG(gain=exp)"] = vals["ndcg"]
        for k in CUTOFFS:
            out[qid, f"nDCG(gain=exp)@{k}"] = vals[f"ndcg_cut_{k}"]
    return out


@pytest.mark.parametrize("seed", quick_first(range(6), 2))
def test_trec_web_grades_minus_2_to_4_match_trec_eval(seed: int) -> None:
    """Any integer grade, as trec_eval takes it: relevant when grade >= rel, nDCG gain = grade
    (a negative grade gains 0, never less), thresholds 1, 2 and 3."""
    qrels, run = random_case(np.random.default_rng(100 + seed), n_queries=40, grades=(-2, 4))
    assert {g for docs in qrels.values() for g in docs.values()} == set(range(-2, 5))
    q, r = frames(qrels, run)
    skip = evaluate(q, r, ALL_MEASURES, missing="skip")
    ours = relgrade_values(skip)
    ref = trec_eval_values(as_trec_eval_reads(qrels), run)
    assert_close(ours, ref)
    assert_close(ours, exp_gain_values(qrels, run))
    assert_close(list_values(qrels, run), ref)
    means = mean_scores(skip).set_index("measure")["value"]
    for measure in {m for (_, m) in ref}:
        vals = [v for (_, m), v in ref.items() if m == measure]
        assert abs(means[measure] - np.mean(vals)) <= TOL


@pytest.mark.parametrize("sep", [" ", " \t"], ids=["fast-path", "irregular-path"])
def test_files_with_extra_columns_and_comments_match_trec_eval(tmp_path: Path, sep: str) -> None:
    """Run lines with columns after the sixth and `#` comment lines in runs and qrels read as
    trec_eval 10 reads them; pytrec_eval cannot take comments, so it scores the same data
    without them."""
    qrels, run = random_case(np.random.default_rng(2024), n_queries=30, grades=(-2, 4))
    q, r = frames(qrels, run)
    write_run(tmp_path / "clean.run", r, "test")
    lines = (tmp_path / "clean.run").read_text().splitlines()
    noisy = ["# run: test, k1=0.9 b=0.4", "#q0 Q0 d0_0 1 99.0 test"]
    for i, line in enumerate(lines):
        noisy.append(sep.join(line.split()) + f"{sep}extra{sep}{i}")
        if i % 7 == 3:
            noisy.append("# a comment between lines")
    (tmp_path / "noisy.run").write_text("\n".join(noisy) + "\n")
    qrel_lines = [f"{a} 0 {b} {c}" for a, b, c in q.itertuples(index=False)]
    qrel_lines.insert(len(qrel_lines) // 2, "# judged by people")
    (tmp_path / "noisy.qrels").write_text("# TREC Web style\n" + "\n".join(qrel_lines) + "\n")
    per_query = evaluate(
        read_qrels(tmp_path / "noisy.qrels", any_grade=True),
        read_run(tmp_path / "noisy.run"),
        ALL_MEASURES,
        missing="skip",
    )
    assert_close(relgrade_values(per_query), trec_eval_values(as_trec_eval_reads(qrels), run))


def test_binary_qrels_with_the_inferred_threshold_match_trec_eval_defaults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Binary qrels and names without (rel=N), end to end through `relgrade evaluate`: the
    threshold is inferred as 1, so the numbers are trec_eval's with its default -l 1."""
    from grader.cli.main import main

    qrels, run = random_case(np.random.default_rng(11), n_queries=40, grades=(0, 1))
    q, r = frames(qrels, run)
    write_run(tmp_path / "bin.run", r, "test")
    (tmp_path / "bin.qrels").write_text(
        "".join(f"{a} 0 {b} {c}\n" for a, b, c in q.itertuples(index=False))
    )
    ref = trec_eval_values(qrels, run, thresholds=(1,))
    bare = sorted({m.replace("(rel=1)", "") for (_, m) in ref})
    argv = ["evaluate", str(tmp_path / "bin.qrels"), str(tmp_path / "bin.run"), "-m", *bare]
    assert main([*argv, "--per-query", "--trec-eval-missing", "--format", "json"]) == 0
    captured = capsys.readouterr()
    records = json.loads(captured.out)
    ours = {(r["query_id"], r["measure"]): r["value"] for r in records if r["query_id"] != "all"}
    assert {m for (_, m) in ours} == {m for (_, m) in ref}  # every name printed with rel=1
    assert_close(ours, ref)
    means = {r["measure"]: r["value"] for r in records if r["query_id"] == "all"}
    for measure, mean in means.items():
        vals = [v for (_, m), v in ref.items() if m == measure]
        assert abs(mean - np.mean(vals)) <= TOL
    assert "binary qrels" in captured.err
