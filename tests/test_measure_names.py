"""Measure names as ir_measures means them: relgrade's spellings parse and print back with the
threshold explicit and mean ir_measures' measure, refused spellings say why, and the count
measures (NumRet, NumRelRet) are summed, not averaged, in every output format."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import ir_measures
import pandas as pd
import pytest
from ir_measures.providers.base import NOT_PROVIDED

from grader.cli.main import main
from grader.errors import InputError
from grader.metrics import evaluate, parse_measure
from grader.metrics.counts import err
from tests.helpers.ir_measures_ref import GAINS, Qrels, Run, irm_name, write_trec


def irm_meaning(measure: ir_measures.Measure) -> tuple[object, ...]:
    """An ir_measures measure with every parameter filled in (defaults too), gain maps without
    their g:g entries: two spellings mean the same measure when these are equal."""
    params = []
    for key in sorted(measure.SUPPORTED_PARAMS):
        value = measure[key]
        if value is NOT_PROVIDED:
            value = None
        elif isinstance(value, dict):
            value = tuple((g, v) for g, v in sorted(value.items()) if g != v) or None
        params.append((key, value))
    return (measure.NAME, *params)


@pytest.mark.parametrize(
    ("written", "printed", "ir_measures_spelling"),
    [
        ("nDCG(dcg='exp-log2')@10", "nDCG(gain=exp)@10", "nDCG(dcg='exp-log2')@10"),
        ('nDCG(dcg="exp-log2")@10', "nDCG(gain=exp)@10", "nDCG(dcg='exp-log2')@10"),
        ("nDCG(dcg=log2)@10", "nDCG@10", "nDCG(dcg='log2')@10"),
        (f"nDCG(gains={GAINS})@10", "nDCG(gains={2:3,3:7})@10", f"nDCG(gains={GAINS})@10"),
        ("nDCG(gains={3: 7, 0: 0})", "nDCG(gains={3:7})", "nDCG(gains={3:7,0:0})"),
        ("nDCG(gains={0:0,1:1})@5", "nDCG@5", "nDCG(gains={0:0,1:1})@5"),
        (
            "nDCG(judged_only=True,gains={3:7})@5",
            "nDCG(gains={3:7},judged_only=True)@5",
            "nDCG(judged_only=True,gains={3:7})@5",
        ),
        (
            "P(judged_only=True,rel=3)@10",
            "P(rel=3,judged_only=True)@10",
            "P(judged_only=True,rel=3)@10",
        ),
        ("RR(judged_only=False)@10", "RR(rel=2)@10", "RR(rel=2,judged_only=False)@10"),
        (
            "Success(judged_only=true)@1",
            "Success(rel=2,judged_only=True)@1",
            "Success(rel=2,judged_only=True)@1",
        ),
        ("ERR@20", "ERR@20", "ERR@20"),
        ("err", "ERR", "ERR"),
        ("BPref", "Bpref(rel=2)", "BPref(rel=2)"),
        ("Bpref(rel=1)", "Bpref(rel=1)", "Bpref"),
        ("NumRet", "NumRet", "NumRet"),
        ("num_ret", "NumRet", "NumRet"),
        ("NumRet(rel=1)", "NumRelRet(rel=1)", "NumRelRet"),
        ("NumRelRet", "NumRelRet(rel=2)", "NumRet(rel=2)"),
        ("NumRel(rel=3)", "NumRel(rel=3)", "NumRel(rel=3)"),
    ],
)
def test_names_parse_and_print_back_with_the_threshold_explicit(
    written: str, printed: str, ir_measures_spelling: str
) -> None:
    measure = parse_measure(written)
    assert str(measure) == printed
    assert parse_measure(printed) == measure
    # ir_measures reads relgrade's printed name as the measure it means by its own spelling
    ours = ir_measures.parse_measure(irm_name(printed))
    assert irm_meaning(ours) == irm_meaning(ir_measures.parse_measure(ir_measures_spelling))


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("Judged(judged_only=True)@10", "Judged takes no judged_only"),
        ("ERR(judged_only=True)@10", "ERR takes no judged_only"),
        ("Bpref(judged_only=True)", "Bpref takes no judged_only"),
        ("ERR(rel=2)@10", "ERR takes no threshold"),
        ("Bpref@10", "Bpref takes no @k cutoff"),
        ("NumRet@10", "NumRet takes no @k cutoff"),
        ("P(gains={3:7})@10", "P takes no gains"),
        ("P(dcg='exp-log2')@10", "P takes no dcg"),
        ("nDCG(dcg='exp')@10", "unknown dcg"),
        ("nDCG(gains={a:1})@10", "must be grade:gain"),
        ("nDCG(gains={3:-1})@10", "negative"),
        ("nDCG(gains={-2:1})@10", "negative grades always gain 0"),
        ("nDCG(gains={3:7,3:5})@10", "twice"),
        ("nDCG(gains=3)@10", "must be a map in braces"),
        ("nDCG(gain=exp,gains={3:9})@10", "contradict"),
        ("nDCG(judged_only=yes)@10", "not True or False"),
        ("nDCG(foo=1)@10", "unknown parameter 'foo'"),
    ],
)
def test_refused_spellings_say_why(name: str, says: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_measure(name)
    assert says in str(caught.value)
    assert name in str(caught.value)


def test_err_refuses_grades_above_four_like_gdeval() -> None:
    q = pd.DataFrame({"query_id": ["1", "1"], "doc_id": ["a", "b"], "grade": [5, 1]})
    r = pd.DataFrame({"query_id": ["1"], "doc_id": ["a"], "score": [1.0]})
    with pytest.raises(InputError, match="up to 4"):
        evaluate(q, r, ["ERR@10"])
    with pytest.raises(ValueError, match="up to 4"):
        err([5, 1])


def test_cli_sums_counts_in_table_csv_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels: Qrels = {"1": {"a": 3, "b": 0, "c": 2}, "2": {"d": 1, "e": 2}, "3": {"f": 2}}
    run: Run = {"1": {"a": 2.0, "x": 1.0, "b": 0.5}, "2": {"e": 1.0, "d": 0.5}}
    qrels_path, run_path = write_trec(tmp_path, qrels, run)
    args = ["evaluate", str(qrels_path), str(run_path), "-m", "NumRet", "NumRelRet", "ERR@10"]
    assert main([*args, "--format", "json", "--per-query"]) == 0
    records = json.loads(capsys.readouterr().out)
    by = {(r["query_id"], r["measure"]): r["value"] for r in records}
    assert by["all", "NumRet"] == 5 and by["all", "NumRelRet(rel=2)"] == 2
    assert by["3", "NumRet"] == 0
    # 1: a (grade 3) first; 2: e (2) then d (1); 3: unanswered
    assert by["all", "ERR@10"] == pytest.approx((7 / 16 + 3 / 16 + 13 / 16 * 1 / 16 / 2) / 3)
    assert main([*args, "--format", "csv"]) == 0
    rows = {
        r["measure"]: r["value"]
        for r in csv.DictReader(io.StringIO(capsys.readouterr().out))
        if r["query_id"] == "all"
    }
    assert rows["NumRet"] == "5" and rows["NumRelRet(rel=2)"] == "2"
    assert main(args) == 0
    table = capsys.readouterr().out
    assert "NumRet, NumRelRet(rel=2): summed over queries, not averaged" in table
    cells = {
        line.split("│")[1].strip(): line.split("│")[2].strip()
        for line in table.splitlines()
        if line.count("│") == 3
    }
    assert cells == {"NumRet": "5", "NumRelRet(rel=2)": "2", "ERR@10": f"{by['all', 'ERR@10']:.4f}"}


def test_evaluate_help_lists_the_new_measures_and_spellings(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    text = capsys.readouterr().out
    for part in ("ERR@k", "Bpref(rel=N)", "NumRet", "NumRel(rel=N)", "NumRelRet(rel=N)"):
        assert part in text
    for part in ("judged_only=True", "dcg='exp-log2'", "gains={0:0,1:1,2:3,3:7}"):
        assert part in text
