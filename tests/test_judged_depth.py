"""Measures that look deeper than the labels get a caution, and a run whose document ids the
qrels do not know gets a warning: on stderr (and `judged_share` in JSON) through the command
line, as a RelgradeWarning (and a `judged_share` column) through the API."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import relgrade as rg
from grader.cli.main import main
from grader.errors import RelgradeWarning
from tests.helpers.ir_measures_ref import Qrels, Run, write_trec

MEASURES = ["nDCG@10", "P@10", "RR@10", "R@100", "AP", "Judged@10"]


def depth_10_case(judged_depth: int = 10) -> tuple[Qrels, Run]:
    """A run of 100 results per query whose top `judged_depth` alone is graded, as
    `grade --depth 10` leaves it: Judged@10 = 1 while Judged@100 = 0.1."""
    rng = np.random.default_rng(7)
    qrels: Qrels = {}
    run: Run = {}
    for q in range(6):
        qid = str(q + 1)
        docs = [f"D{q}_{i:03d}" for i in range(100)]
        run[qid] = {d: float(100 - i) for i, d in enumerate(docs)}
        grades = rng.integers(0, 4, judged_depth)
        grades[0] = 3
        qrels[qid] = {d: int(g) for d, g in zip(docs[:judged_depth], grades, strict=True)}
    return qrels, run


def _cli(capsys: pytest.CaptureFixture[str], qrels: Path, run: Path, *args: str) -> tuple[str, str]:
    assert main(["evaluate", str(qrels), str(run), "-m", *MEASURES, *args]) == 0
    out = capsys.readouterr()
    return out.out, out.err


def test_r_at_100_and_ap_on_depth_10_labels_get_one_caution(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels_path, run_path = write_trec(tmp_path, *depth_10_case())
    out, err = _cli(capsys, qrels_path, run_path, "--format", "json")
    cautions = [line for line in err.splitlines() if line.startswith("caution:")]
    assert len(cautions) == 1
    line = cautions[0]
    assert line.startswith("caution: run run: ")
    assert "R(rel=2)@100, AP(rel=2) where Judged@100 = 0.1000" in line
    assert "nDCG@10" not in line and "P(rel=2)@10" not in line and "RR(rel=2)@10" not in line
    records = json.loads(out)
    shares = {r["measure"]: r.get("judged_share") for r in records if r["query_id"] == "all"}
    assert shares["R(rel=2)@100"] == pytest.approx(0.1) and shares["AP(rel=2)"] == pytest.approx(
        0.1
    )
    assert shares["nDCG@10"] is None and shares["Judged@10"] is None
    judged = {r["measure"]: r["value"] for r in records if r["query_id"] == "all"}
    assert judged["Judged@10"] == 1.0  # what the table shows beside R@100 without the caution
    assert judged["R(rel=2)@100"] == 1.0  # recall's denominator knows the judged top 10 only
    # per query records carry no judged_share
    out, _ = _cli(capsys, qrels_path, run_path, "--format", "json", "--per-query")
    assert all("judged_share" not in r for r in json.loads(out) if r["query_id"] != "all")
    # the table prints it on stderr too
    _, err = _cli(capsys, qrels_path, run_path)
    assert "caution: run run: R(rel=2)@100, AP(rel=2) where Judged@100 = 0.1000" in err


def test_the_api_warns_with_the_same_caution() -> None:
    qrels, run = depth_10_case()
    with pytest.warns(RelgradeWarning, match=r"R\(rel=2\)@100, AP\(rel=2\) where Judged@100"):
        frame = rg.evaluate(qrels, run, MEASURES)
    shares = dict(zip(frame.measure, frame.judged_share, strict=True))
    assert shares["AP(rel=2)"] == pytest.approx(0.1) and np.isnan(shares["nDCG@10"])


def test_labels_deep_enough_say_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    qrels, run = depth_10_case(judged_depth=100)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        frame = rg.evaluate(qrels, run, ["nDCG@10", "R(rel=2)@100", "AP(rel=2)"])
    assert "judged_share" not in frame.columns
    qrels_path, run_path = write_trec(tmp_path, qrels, run)
    out, err = _cli(capsys, qrels_path, run_path, "--format", "json")
    assert "caution" not in err and all("judged_share" not in r for r in json.loads(out))
    # 91 of 100 judged is within the 10%; 89 is not
    for depth, cautioned in ((91, False), (89, True)):
        qrels, run = depth_10_case(judged_depth=depth)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rg.evaluate(qrels, run, ["AP(rel=2)"])
        assert any("caution" in str(w.message) for w in caught) is cautioned


def test_judged_only_and_bpref_get_no_caution() -> None:
    qrels, run = depth_10_case()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rg.evaluate(qrels, run, ["AP(rel=2,judged_only=True)", "Bpref(rel=2)", "NumRet"])


def _other_ids(run: Run) -> Run:
    """The run with every document id written another way (MS MARCO v2 style)."""
    return {q: {f"msmarco_passage_00_{d}": s for d, s in docs.items()} for q, docs in run.items()}


def test_a_run_with_other_document_ids_warns(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels, run = depth_10_case()
    qrels_path, run_path = write_trec(tmp_path, qrels, _other_ids(run))
    out, err = _cli(capsys, qrels_path, run_path, "--format", "json")
    warned = [line for line in err.splitlines() if line.startswith("warning: run run:")]
    assert len(warned) == 1 and "caution" not in err  # one message, not a caution as well
    assert "none of its document ids is in the qrels on the 6 queries they share" in warned[0]
    assert "Judged@10 = 0.0000" in warned[0]
    assert all(r["value"] == 0 for r in json.loads(out) if r["query_id"] == "all")
    with pytest.warns(RelgradeWarning, match="none of its document ids is in the qrels"):
        rg.evaluate(qrels, _other_ids(run), MEASURES)


def test_ids_read_as_numbers_warn() -> None:
    qrels = {"1": {"0012": 2, "0013": 0}, "2": {"0020": 1}}
    run = {"1": {"12": 2.0, "13": 1.0}, "2": {"20": 1.0}}
    with pytest.warns(RelgradeWarning, match="none of its document ids") as caught:
        rg.evaluate(qrels, run, ["nDCG@10"])
    assert len([w for w in caught if "document ids" in str(w.message)]) == 1


def test_almost_no_judged_result_warns_too() -> None:
    qrels, run = depth_10_case()
    # 4 of 60 top-10 results judged (Judged@10 = 0.067) is not below 5%; 2 of 60 (0.033) is
    for judged, warned in ((4, False), (2, True)):
        other = _other_ids(run)
        for i, qid in enumerate(sorted(other)[:judged]):
            top = sorted(other[qid], key=other[qid].__getitem__, reverse=True)[i]
            other[qid][top.removeprefix("msmarco_passage_00_")] = other[qid].pop(top)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rg.evaluate(qrels, other, ["nDCG@10"])
        said = [str(w.message) for w in caught if "document ids" in str(w.message)]
        assert bool(said) is warned
        if said:
            assert "almost none of its top 10 is in the qrels" in said[0]
