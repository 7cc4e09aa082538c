"""relgrade's measures give ir_measures' values: the new measures and spellings cross-checked.

Every name below is handed to ir_measures 0.4.3 as relgrade prints it (only `gain=exp` is
written `dcg='exp-log2'`), and per-query values and means must agree to 1e-9 with relgrade
scoring every qrels query (ir_measures fills unanswered ones with 0, like missing="zero"):
judged_only=True on nDCG, RR, P, R, AP, Rprec and Success, nDCG(gains={...}), Bpref(rel=N),
NumRet, NumRelRet(rel=N) (ir_measures' NumRet(rel=N)) and NumRel, with counts summed.

ERR and nDCG(dcg='exp-log2') are computed by ir_measures through gdeval.pl, which prints 5
decimals: they agree with ir_measures to 5e-6 and, to 1e-9, with the same gdeval.pl run here
with its print format widened. What ir_measures cannot compute (RR with judged_only and a
cutoff, NumRel above rel=1, ERR and exp-log2 nDCG without a cutoff) is checked against
pytrec_eval or gdeval directly. (The spellings themselves: tests/test_measure_names.py.)
"""

from __future__ import annotations

import pkgutil
import subprocess
from pathlib import Path

import ir_measures
import numpy as np
import pandas as pd
import pytest
import pytrec_eval

from grader.io.trec import read_qrels, read_run
from grader.metrics import evaluate, mean_scores, parse_measure
from grader.metrics.binary import precision_at_k, reciprocal_rank
from grader.metrics.counts import bpref, err
from grader.metrics.ndcg import ndcg
from tests.helpers.ir_measures_ref import GAINS, Qrels, Run, Values, frames, irm_name, write_trec
from tests.helpers.params import quick_first
from tests.helpers.trec import DL2019, trec_order

TOL = 1e-9
GDEVAL_TOL = 5e-6 + 1e-12  # gdeval prints %.5f
CUTOFFS = (1, 5, 10)
THRESHOLDS = (1, 2, 3)
NO_CUTOFF = 10**6  # gdeval always cuts; deeper than any test ranking is "no cutoff"


def irm_names() -> list[str]:
    """relgrade names that ir_measures computes through pytrec_eval (threshold explicit)."""
    names = ["NumRet", "NumRel(rel=1)", f"nDCG(gains={GAINS})", "nDCG(gains={1:5,2:3})"]
    names += [f"nDCG(gains={GAINS},judged_only=True)", "nDCG(judged_only=True)"]
    for t in THRESHOLDS:
        names += [f"Bpref(rel={t})", f"NumRelRet(rel={t})"]
        names += [f"RR(rel={t},judged_only=True)", f"AP(rel={t},judged_only=True)"]
        names += [f"Rprec(rel={t},judged_only=True)"]
        for k in CUTOFFS:
            names += [f"P(rel={t},judged_only=True)@{k}", f"R(rel={t},judged_only=True)@{k}"]
            names += [f"AP(rel={t},judged_only=True)@{k}"]
            names += [f"Success(rel={t},judged_only=True)@{k}"]
    for k in CUTOFFS:
        names += [f"nDCG(judged_only=True)@{k}", f"nDCG(gains={GAINS},judged_only=True)@{k}"]
        names += [f"nDCG(gains={GAINS})@{k}"]
    return names


GDEVAL_NAMES = [f"ERR@{k}" for k in CUTOFFS] + [f"nDCG(gain=exp)@{k}" for k in CUTOFFS]


def random_case(rng: np.random.Generator, n_queries: int) -> tuple[Qrels, Run]:
    """Numeric query ids (gdeval needs them), ties, unjudged results, queries without relevant
    documents, judged queries without results and run queries without judgments."""
    qrels: Qrels = {}
    run: Run = {}
    for q in range(n_queries):
        qid = str(100 + q)
        n_judged = int(rng.integers(1, 15))
        grades = rng.integers(0, 4, n_judged) * (rng.random() >= 0.1)  # some: no relevant doc
        docs = [f"d{q}_{i}" for i in range(n_judged)]
        qrels[qid] = {d: int(g) for d, g in zip(docs, grades, strict=True)}
        if rng.random() < 0.1:
            continue
        pool = docs + [f"u{q}_{i}" for i in range(int(rng.integers(0, 15)))]
        picked = rng.choice(pool, size=int(rng.integers(1, len(pool) + 1)), replace=False)
        if rng.random() < 0.3:
            scores = rng.integers(0, 3, size=len(picked)).astype(float)  # exact ties
        else:
            scores = np.round(rng.normal(size=len(picked)), 3)
        run[qid] = {str(d): float(s) for d, s in zip(picked, scores, strict=True)}
    run["99999"] = {"d0_0": 1.0, "zz": 0.5}  # not in the qrels: ignored by everyone
    return qrels, run


def ir_measures_values(qrels: Qrels, run: Run, names: list[str]) -> tuple[Values, Values]:
    """Per-query values and aggregates from ir_measures for relgrade's printed names.

    One call per measure: ir_measures 0.4.3 puts NumRet and plain nDCG into whichever
    pytrec_eval invocation comes first, so beside a judged_only measure or a gain map they
    would be computed on the condensed list or the mapped gains (its bug, not a definition)."""
    irm_qrels = [ir_measures.Qrel(q, d, g) for q, docs in qrels.items() for d, g in docs.items()]
    irm_run = [ir_measures.ScoredDoc(q, d, s) for q, docs in run.items() for d, s in docs.items()]
    per_query: Values = {}
    means: Values = {}
    for name in names:
        # ir_measures gets the name as written, relgrade's values are keyed by its printed one
        measure, printed = ir_measures.parse_measure(irm_name(name)), str(parse_measure(name))
        result = ir_measures.calc([measure], irm_qrels, irm_run)
        assert isinstance(result.aggregated, dict)  # one per measure asked: a dict, not a number
        means["all", printed] = float(result.aggregated[measure])
        for m in result.per_query:
            per_query[m.query_id, printed] = float(m.value)
    return per_query, means


def relgrade_values(per_query: pd.DataFrame) -> Values:
    out = {(str(q), str(m)): float(v) for q, m, v in per_query.itertuples(index=False)}
    for m, v in mean_scores(per_query).itertuples(index=False):
        out["all", str(m)] = float(v)
    return out


def assert_close(ours: Values, ref: Values, tol: float = TOL) -> None:
    assert ref, "no reference values"
    for key, expected in ref.items():
        assert key in ours, f"relgrade has no value for {key}"
        assert abs(ours[key] - expected) <= tol, f"{key}: relgrade {ours[key]} != {expected}"


def gdeval_full_precision(folder: Path, qrels: Qrels, run: Run, k: int) -> Values:
    """ERR@k and exp-gain nDCG@k per query from ir_measures' own gdeval.pl, printed in full."""
    script = pkgutil.get_data("ir_measures", "bin/gdeval.pl")
    assert script is not None
    text = script.decode()
    assert text.count("%.5f,%.5f") == 1
    (folder / "gdeval.pl").write_text(text.replace("%.5f,%.5f", "%.17g,%.17g"))
    # gdeval reads the score column only: full float64 precision, as ir_measures writes it
    lines = [
        f"{q} Q0 {d} 0 {float(s)!r} test\n" for q, docs in run.items() for d, s in docs.items()
    ]
    (folder / "gd.run").write_text("".join(lines))
    qrels_path, _ = write_trec(folder, qrels, {})
    out = subprocess.run(
        ["perl", str(folder / "gdeval.pl"), str(qrels_path), str(folder / "gd.run"), str(k)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    suffix = "" if k == NO_CUTOFF else f"@{k}"
    values: Values = {}
    for line in out.splitlines()[1:]:
        _, qid, ndcg_value, err_value = line.split(",")
        values[qid, f"nDCG(gain=exp){suffix}"] = float(ndcg_value)
        values[qid, f"ERR{suffix}"] = float(err_value)
    return values


def pytrec_eval_values(qrels: Qrels, run: Run) -> Values:
    """What ir_measures cannot compute: NumRel(rel>1), and RR with judged_only and a cutoff
    (trec_eval's recip_rank -J on each run cut to the top k of its condensed list)."""
    out: Values = {}
    for t in THRESHOLDS:
        res = pytrec_eval.RelevanceEvaluator(qrels, {"num_rel"}, relevance_level=t).evaluate(run)
        out.update({(q, f"NumRel(rel={t})"): v["num_rel"] for q, v in res.items()})
        for k in CUTOFFS:
            top_k = {
                q: {d: docs[d] for d in trec_order(docs) if qrels.get(q, {}).get(d, -1) >= 0}
                for q, docs in run.items()
            }
            top_k = {q: {d: docs[d] for d in trec_order(docs)[:k]} for q, docs in top_k.items()}
            ev = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}, relevance_level=t)
            for q, v in ev.evaluate(top_k).items():
                out[q, f"RR(rel={t},judged_only=True)@{k}"] = v["recip_rank"]
    return out


def list_values(qrels: Qrels, run: Run) -> Values:
    """The list functions on each answered query's graded list."""
    out: Values = {}
    for qid, judged in qrels.items():
        if qid not in run:
            continue
        rels: list[int | None] = [judged.get(d) for d in trec_order(run[qid])]
        ideal = list(judged.values())
        short = [g for g in rels if g is not None and g >= 0]  # judged_only=True's list
        gains = parse_measure(f"nDCG(gains={GAINS})").gains
        out[qid, "nDCG(judged_only=True)"] = ndcg(short, ideal)
        out[qid, str(parse_measure(f"nDCG(gains={GAINS})"))] = ndcg(rels, ideal, gains=gains)
        for k in CUTOFFS:
            out[qid, f"ERR@{k}"] = err(rels, k)
            out[qid, f"nDCG(judged_only=True)@{k}"] = ndcg(short, ideal, k)
        for t in THRESHOLDS:
            n_rel = sum(1 for g in ideal if g >= t)
            n_nonrel = sum(1 for g in ideal if 0 <= g < t)
            out[qid, f"Bpref(rel={t})"] = bpref(rels, n_rel, n_nonrel, t)
            out[qid, f"RR(rel={t},judged_only=True)"] = reciprocal_rank(short, t)
            for k in CUTOFFS:
                out[qid, f"P(rel={t},judged_only=True)@{k}"] = precision_at_k(short, k, t)
                out[qid, f"RR(rel={t},judged_only=True)@{k}"] = reciprocal_rank(short, t, k)
    return out


def check_against_references(tmp_path: Path, qrels: Qrels, run: Run) -> None:
    """relgrade vs ir_measures, pytrec_eval, gdeval.pl and its own list functions."""
    q, r = frames(qrels, run)
    extra = [f"NumRel(rel={t})" for t in (2, 3)]
    extra += [f"RR(rel={t},judged_only=True)@{k}" for t in THRESHOLDS for k in CUTOFFS]
    extra += ["ERR", "nDCG(gain=exp)"]
    names = irm_names() + GDEVAL_NAMES + extra
    zero = evaluate(q, r, names)
    ours = relgrade_values(zero)
    per_query, means = ir_measures_values(qrels, run, irm_names())
    assert {key[0] for key in per_query} == set(qrels)  # every qrels query, filled with 0
    assert_close(ours, per_query)
    assert_close(ours, means)
    gd_query, gd_means = ir_measures_values(qrels, run, GDEVAL_NAMES)
    assert_close(ours, gd_query, GDEVAL_TOL)
    assert_close(ours, gd_means, GDEVAL_TOL)
    exact: Values = {}
    for k in (*CUTOFFS, NO_CUTOFF):
        exact.update(gdeval_full_precision(tmp_path, qrels, run, k))
    assert_close(ours, exact)
    # pytrec_eval scores answered queries only: relgrade's missing="skip"
    skip = relgrade_values(evaluate(q, r, names, missing="skip"))
    assert_close(skip, pytrec_eval_values(qrels, run))
    lists = list_values(qrels, run)
    assert_close(skip, lists)


@pytest.mark.slow
@pytest.mark.parametrize("seed", quick_first(range(3)))
def test_random_qrels_and_runs_match_ir_measures(tmp_path: Path, seed: int) -> None:
    qrels, run = random_case(np.random.default_rng(seed), n_queries=100)
    check_against_references(tmp_path, qrels, run)


def test_counts_are_summed_in_the_mean_row() -> None:
    qrels, run = random_case(np.random.default_rng(11), n_queries=60)
    q, r = frames(qrels, run)
    names = ["NumRet", "NumRel(rel=2)", "NumRelRet(rel=1)"]
    means = mean_scores(evaluate(q, r, names)).set_index("measure")["value"]
    answered = [qid for qid in qrels if qid in run]
    assert means["NumRet"] == sum(len(run[qid]) for qid in answered)
    # trec_eval -c and ir_measures count unanswered queries 0, so the sum covers answered ones
    assert means["NumRel(rel=2)"] == sum(
        sum(1 for g in qrels[qid].values() if g >= 2) for qid in answered
    )
    assert means["NumRelRet(rel=1)"] == sum(
        sum(1 for d in run[qid] if qrels[qid].get(d, 0) >= 1) for qid in answered
    )
    empty = pd.DataFrame({"query_id": [], "doc_id": [], "score": []})
    skipped = mean_scores(evaluate(q, empty, ["NumRet", "P@5"], missing="skip"))
    assert skipped["value"].iloc[0] == 0.0 and np.isnan(skipped["value"].iloc[1])


def test_negative_grades_and_grade_four_match_trec_eval_and_gdeval(tmp_path: Path) -> None:
    """trec_eval reads a negative grade as unjudged (judged_only drops it, Bpref skips it);
    gdeval drops it and takes grades up to 4."""
    qrels: Qrels = {
        "1": {"a": 3, "b": 1, "c": 0, "d": 2, "e": -1, "f": 4, "g": -2},
        "2": {"h": 0, "i": -1, "j": 2},
    }
    run: Run = {
        "1": {"a": 0.1, "x": 0.9, "b": 0.8, "c": 0.7, "e": 0.6, "d": 0.05, "g": 0.5, "f": 0.2},
        "2": {"i": 3.0, "y": 2.0, "h": 1.0, "j": 0.5},
    }
    check_against_references(tmp_path, qrels, run)


def test_ranking_ties_in_double_precision_match_gdeval(tmp_path: Path) -> None:
    """gdeval compares scores in float64: precision="float64" gives its order exactly."""
    qrels: Qrels = {"1": {"a": 3, "b": 1, "c": 2}}
    run: Run = {"1": {"a": 1.0 + 2e-12, "b": 1.0 + 1e-12, "c": 1.0}}
    q, r = frames(qrels, run)
    names = ["ERR@10", "nDCG(gain=exp)@10"]
    ours = relgrade_values(evaluate(q, r, names, precision="float64"))
    assert_close(ours, gdeval_full_precision(tmp_path, qrels, run, 10))
    float32 = relgrade_values(evaluate(q, r, names))
    assert float32["1", "ERR@10"] != ours["1", "ERR@10"]  # float32: a 3-way tie, by doc id


@pytest.mark.skipif(not (DL2019 / "2019qrels-pass.txt").exists(), reason="TREC DL 2019 absent")
@pytest.mark.slow
def test_trec_dl_2019_with_a_run_ranked_by_llm_labels(tmp_path: Path) -> None:
    """Human qrels; a run ranking each query's pool by an LLM label set's grade (ties broken by
    noise rounded to make some exact ties) with unjudged passages mixed in."""
    human = read_qrels(DL2019 / "2019qrels-pass.txt")
    llm_path = sorted((DL2019 / "llm-labels").glob("*.txt"))[0]
    llm = read_qrels(llm_path)
    qrels: Qrels = {}
    for qid, did, grade in human.itertuples(index=False):
        qrels.setdefault(str(qid), {})[str(did)] = int(grade)
    rng = np.random.default_rng(2019)
    others = human["doc_id"].astype(str).unique()
    run: Run = {}
    for i, (qid, group) in enumerate(llm.groupby("query_id", sort=False)):
        if i % 9 == 0:
            continue  # some judged queries unanswered
        top = group.sample(n=min(len(group), 120), random_state=i)
        scores = top["grade"].to_numpy() + np.round(rng.random(len(top)), 1)
        docs = {str(d): float(s) for d, s in zip(top["doc_id"], scores, strict=True)}
        for did in rng.choice(others, size=40, replace=False):  # judged for other queries only
            if str(did) not in qrels[str(qid)]:
                docs[str(did)] = float(np.round(rng.random() * 4, 1))
        run[str(qid)] = docs
    check_against_references(tmp_path, qrels, run)
    # the same through the TREC readers
    qrels_path, run_path = write_trec(tmp_path, qrels, run)
    from_files = evaluate(read_qrels(qrels_path), read_run(run_path), irm_names())
    per_query, means = ir_measures_values(qrels, run, irm_names())
    assert_close(relgrade_values(from_files), {**per_query, **means})
