"""A name from another tool keeps that tool's meaning: every row of docs/evaluate.md's table of
names, cross-checked per query (1e-9) against the reference it names (ir_measures'
`iter_calc`/`calc_aggregate`, pytrec_eval at trec_eval's relevance level), on a small synthetic
case that always runs and on TREC DL 2019 (skipped when the data is absent); then the names
through the command line (`--trec-eval-level`, `requested` in JSON and CSV) and the errors."""

from __future__ import annotations

import csv
import io
import json
import re
import warnings
from pathlib import Path
from typing import Any

import ir_measures
import numpy as np
import pytest
import pytrec_eval

import relgrade as rg
from grader.cli.main import main
from grader.errors import InputError
from grader.metrics import parse_measure
from tests.helpers.fill_data import DATA, human_qrels, label_set
from tests.helpers.ir_measures_ref import Qrels, Run, write_trec

TOL = 1e-9
DOCS = Path(__file__).resolve().parents[1] / "docs" / "evaluate.md"
_ROW = re.compile(
    r"^\| `([^`]+)`(?:, level (\d+))? \| `([^`]+)` \| (ir_measures|trec_eval) `([^`]+)`"
)


def table_rows() -> list[tuple[str, int, str, str, str, int]]:
    """(written, trec_eval level, printed, reference tool, reference name, reference level)."""
    rows = []
    for line in DOCS.read_text().splitlines():
        match = _ROW.match(line)
        if match:
            written, level, printed, tool, ref = match.groups()
            ref_level = re.search(r"\(`-l (\d+)`\)", line)
            rows.append(
                (
                    written,
                    int(level or 1),
                    printed,
                    tool,
                    ref,
                    int(ref_level[1] if ref_level else 1),
                )
            )
    return rows


ROWS = table_rows()


def test_the_docs_table_names_every_kind() -> None:
    written = [r[0] for r in ROWS]
    assert len(ROWS) >= 40
    for name in ("ir_measures.P@10", "ir_measures.AP", "P_10", "map", "recip_rank", "Rprec"):
        assert name in written
    for name in ("ndcg_cut_10", "ndcg", "recall_100", "success_10", "bpref", "map_cut_10"):
        assert name in written
    assert {"P@10", "RR", "AP"} <= set(written)


def asked(written: str) -> Any:
    """The name as `rg.evaluate` takes it: an ir_measures object for `ir_measures.X`."""
    if written.startswith("ir_measures."):
        return ir_measures.parse_measure(written.removeprefix("ir_measures."))
    return written


def reference(tool: str, name: str, level: int, qrels: Qrels, run: Run) -> dict[str, float]:
    """Per-query values of the reference measure (queries of the qrels the run answers)."""
    if tool == "ir_measures":
        measure = ir_measures.parse_measure(name)
        return {m.query_id: float(m.value) for m in ir_measures.iter_calc([measure], qrels, run)}
    values = pytrec_eval.RelevanceEvaluator(qrels, {name}, relevance_level=level).evaluate(run)
    return {qid: float(v[name]) for qid, v in values.items()}


def untied(run: Run) -> Run:
    """The run with every score distinct (in float32 too): ir_measures computes RR@k and
    Judged@k with providers that break ties by doc id ascending, where relgrade's own names
    break them as trec_eval does (its objects get ties=asc)."""
    out: Run = {}
    for qid, docs in run.items():
        ranked = sorted(docs, key=lambda d: (-docs[d], d))
        out[qid] = {d: float(len(ranked) - i) for i, d in enumerate(ranked)}
    return out


def check_rows(qrels: Qrels, tied: Run) -> None:
    """Every table row: the printed name, per-query values and the mean against the reference."""
    answered = {q for q in tied if q in qrels and tied[q]}
    for written, level, printed, tool, ref, ref_level in ROWS:
        ties_apart = (
            tool == "ir_measures"
            and not written.startswith("ir_measures.")  # objects rank ties as ir_measures does
            and re.match(r"^(RR|Judged)\b.*@", ref) is not None
        )
        run = untied(tied) if ties_apart else tied
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # bare relgrade names: the rel=2 line, cautions
            frame = rg.evaluate(qrels, run, [asked(written)], True, trec_eval_level=level)
        assert set(frame.measure) == {printed}, written
        ours = dict(zip(frame.query_id, frame.value, strict=True))
        theirs = reference(tool, ref, ref_level, qrels, run)
        assert answered <= set(theirs) | {q for q in answered if tool == "ir_measures"}
        for qid, value in theirs.items():
            if qid in qrels:
                assert ours[qid] == pytest.approx(value, abs=TOL), (written, qid)
        if tool == "ir_measures":  # the aggregate as calc_aggregate gives it (0 for unanswered)
            mean = ir_measures.calc_aggregate([ir_measures.parse_measure(ref)], qrels, run)
            assert ours["all"] == pytest.approx(float(next(iter(mean.values()))), abs=TOL), written


def synthetic(seed: int) -> tuple[Qrels, Run]:
    """Grades 0..3, a query without a relevant document, ties, unjudged results, a short
    ranking, a judged query without results and a run query without judgments."""
    rng = np.random.default_rng(seed)
    qrels: Qrels = {}
    run: Run = {}
    for q in range(12):
        qid = str(300 + q)
        docs = [f"d{q}_{i}" for i in range(int(rng.integers(4, 30)))]
        grades = rng.integers(0, 4, len(docs)) * (q != 3)
        qrels[qid] = {d: int(g) for d, g in zip(docs, grades, strict=True)}
        if q == 5:
            continue  # judged, not answered
        pool = docs + [f"u{q}_{i}" for i in range(int(rng.integers(0, 20)))]
        shown = rng.permutation(pool)[: (3 if q == 7 else len(pool))]
        run[qid] = {str(d): float(np.round(rng.random() * 3, 1)) for d in shown}
    run["999"] = {"x": 1.0}
    return qrels, run


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_row_on_a_synthetic_case(seed: int) -> None:
    check_rows(*synthetic(seed))


def dl2019() -> tuple[Qrels, Run]:
    """Human qrels; a run ranking each query's pool by an LLM label set (noise breaks ties),
    with passages judged for other queries mixed in, and some queries unanswered."""
    qrels: Qrels = {}
    for qid, did, grade in human_qrels().itertuples(index=False):
        qrels.setdefault(str(qid), {})[str(did)] = int(grade)
    rng = np.random.default_rng(2019)
    others = sorted({d for docs in qrels.values() for d in docs})
    run: Run = {}
    for i, (qid, group) in enumerate(label_set().groupby("query_id", sort=True)):
        if i % 11 == 0:
            continue
        top = group.sample(n=min(len(group), 150), random_state=i)
        scores = top["grade"].to_numpy() + np.round(rng.random(len(top)) * 2, 1)
        docs = {str(d): float(s) for d, s in zip(top["doc_id"], scores, strict=True)}
        for did in rng.choice(others, size=30, replace=False):
            docs.setdefault(str(did), float(np.round(rng.random() * 4, 1)))
        run[str(qid)] = docs
    return qrels, run


@pytest.mark.skipif(not DATA.is_dir(), reason="TREC DL 2019 data is absent")
def test_every_row_on_trec_dl_2019() -> None:
    qrels, run = dl2019()
    check_rows(qrels, run)
    # the case: ir_measures' objects are ir_measures' numbers, relgrade's strings rel=2
    objects = [ir_measures.P @ 10, ir_measures.RR, ir_measures.AP, ir_measures.R @ 100]
    frame = rg.evaluate(qrels, run, objects)
    expected = ir_measures.calc_aggregate(objects, qrels, run)
    for measure in objects:
        row = frame[frame.requested == str(measure)]
        assert row.value.item() == pytest.approx(expected[measure], abs=TOL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        own = rg.evaluate(qrels, run, ["P@10"])
    assert own.measure.item() == "P(rel=2)@10" and own.value.item() < expected[ir_measures.P @ 10]


def test_an_object_relgrade_cannot_compute_is_an_input_error_naming_it() -> None:
    qrels, run = {"q": {"a": 1}}, {"q": {"a": 1.0}}
    for measure in (ir_measures.SetP, ir_measures.infAP, ir_measures.NumQ, ir_measures.IPrec @ 0.5):
        with pytest.raises(InputError, match=re.escape(f"measure {measure}: relgrade cannot")):
            rg.evaluate(qrels, run, [ir_measures.P @ 1, measure])


def test_names_parse_as_their_tools_mean_them() -> None:
    assert str(parse_measure("P_10")) == "P(rel=1)@10"
    assert str(parse_measure("P_10", trec_eval_level=3)) == "P(rel=3)@10"
    assert str(parse_measure("MAP")) == "AP(rel=1)" and str(parse_measure("AP")) == "AP(rel=2)"
    assert str(parse_measure("Rprec")) == "Rprec(rel=1)"
    assert str(parse_measure("Rprec(rel=2)")) == "Rprec(rel=2)"
    assert str(parse_measure("bpref")) == "Bpref(rel=1)"
    assert str(parse_measure("Bpref")) == "Bpref(rel=2)"
    assert str(parse_measure("MRR")) == "RR(rel=2)"
    assert str(parse_measure(ir_measures.NumRelRet)) == "NumRelRet(rel=1)"
    assert str(parse_measure("Judged@10")) == "Judged@10"
    with pytest.raises(InputError, match="trec_eval level 0"):
        parse_measure("P_10", trec_eval_level=0)


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[str, str]:
    assert main(["evaluate", *args]) == 0
    out = capsys.readouterr()
    return out.out, out.err


def test_trec_eval_names_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels, run = synthetic(4)
    del run["999"]
    qrels_path, run_path = write_trec(tmp_path, qrels, run)
    files = [str(qrels_path), str(run_path)]
    names = ["P_10", "map", "recip_rank", "ndcg_cut_10", "P@5"]
    for level in (1, 2):
        out, err = _cli(
            capsys,
            *files,
            "-m",
            *names,
            "--trec-eval-level",
            str(level),
            "--format",
            "json",
            "--trec-eval-missing",
        )
        records = {r["requested"]: r for r in json.loads(out) if r["query_id"] == "all"}
        assert records["P_10"]["measure"] == f"P(rel={level})@10"
        assert records["map"]["measure"] == f"AP(rel={level})"
        assert records["P@5"]["measure"] == "P(rel=2)@5"  # relgrade's own: TREC DL's rel=2
        ref = pytrec_eval.RelevanceEvaluator(qrels, set(names[:4]), relevance_level=level)
        per_query = ref.evaluate(run)
        for name in names[:4]:
            mean = np.mean([v[name] for v in per_query.values()])
            assert records[name]["value"] == pytest.approx(mean, abs=TOL), (level, name)
        assert f"trec_eval -l {level}): P_10 = P(rel={level})@10, map = AP(rel={level})" in err
    out, _ = _cli(capsys, *files, "-m", "P_10", "RR@10", "--format", "csv", "--per-query")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert {(r["requested"], r["measure"]) for r in rows} == {
        ("P_10", "P(rel=1)@10"),
        ("RR@10", "RR(rel=2)@10"),
    }
    out, _ = _cli(capsys, *files, "-m", "P_10")
    assert "P(rel=1)@10" in out and "P_10 = P(rel=1)@10" in out
    # relgrade's names alone: the records keep their four keys
    out, _ = _cli(capsys, *files, "-m", "P(rel=1)@10", "--format", "json")
    assert all("requested" not in r for r in json.loads(out))


def test_a_level_without_a_trec_eval_name_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels_path, run_path = write_trec(tmp_path, {"q": {"a": 2}}, {"q": {"a": 1.0}})
    out, err = _cli(capsys, str(qrels_path), str(run_path), "-m", "P@1", "--trec-eval-level", "2")
    assert "trec_eval level 2 applies to trec_eval's names only" in out + err
    assert (
        main(["evaluate", str(qrels_path), str(run_path), "-m", "P_1", "--trec-eval-level", "0"])
        == 2
    )
    assert "trec_eval level 0" in capsys.readouterr().err


def test_ties_as_ir_measures_ranks_them_from_files_and_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels: Qrels = {"1": {"a": 1, "z": 0}, "2": {"k": 2}}
    run: Run = {"1": {"a": 1.0, "z": 1.0, "b": 0.5}, "2": {"k": 0.5, "m": 0.5}}
    objects = [ir_measures.RR @ 10, ir_measures.Judged @ 1, ir_measures.RR]
    expected = ir_measures.calc_aggregate(objects, qrels, run)
    assert expected[ir_measures.RR @ 10] != expected[ir_measures.RR]  # the tie matters
    qrels_path, run_path = write_trec(tmp_path, qrels, run)
    for given in (run, str(run_path)):  # a frame-like run and a run file
        frame = rg.evaluate(qrels, given, objects)
        for measure in objects:
            value = frame[frame.requested == str(measure)].value.item()
            assert value == pytest.approx(expected[measure], abs=TOL), (given, measure)
    out, _ = _cli(
        capsys,
        str(qrels_path),
        str(run_path),
        "-m",
        "RR(rel=1,ties=asc)@10",
        "RR(rel=1)@10",
        "--format",
        "json",
    )
    values = {r["measure"]: r["value"] for r in json.loads(out)}
    assert values["RR(rel=1,ties=asc)@10"] == pytest.approx(expected[ir_measures.RR @ 10])
    assert values["RR(rel=1)@10"] == pytest.approx(expected[ir_measures.RR])  # trec_eval's order


def test_a_trec_eval_level_with_fill_is_refused(tmp_path: Path) -> None:
    qrels_path, run_path = write_trec(tmp_path, {"q": {"a": 2}}, {"q": {"a": 1.0}})
    with pytest.raises(InputError, match="does not go with fill="):
        rg.evaluate(
            str(qrels_path), str(run_path), ["P_1"], fill=str(qrels_path), trec_eval_level=2
        )
    args = [str(qrels_path), str(run_path), "--fill", str(qrels_path), "--trec-eval-level", "2"]
    assert main(["evaluate", *args, "-m", "P_1"]) == 2
