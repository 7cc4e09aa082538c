"""A grade too large to read as written: `rg.evaluate` refuses it in a dict or a frame, at the
same bound as `relgrade evaluate` on a file (2**53); below the bound both score it."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

import relgrade as rg
from grader.cli.main import main

RUN = {"r": {"q1": {"d1": 2.0, "d2": 1.0, "d3": 0.5}}}


def _forms(grade: int) -> list[object]:
    as_dict = {"q1": {"d1": 1, "d2": grade, "d3": 0}}
    frame = pd.DataFrame(
        {"query_id": ["q1"] * 3, "doc_id": ["d1", "d2", "d3"], "relevance": [1, grade, 0]}
    )
    return [as_dict, frame]


@pytest.mark.parametrize("grade", [2**63, 2**63 + 1, 2**64, -(2**63), 2**53 + 2])
def test_a_huge_grade_is_refused_as_the_command_refuses_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], grade: int
) -> None:
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(f"q1 0 d1 1\nq1 0 d2 {grade}\nq1 0 d3 0\n")
    run = tmp_path / "run.txt"
    run.write_text("q1 Q0 d1 1 2.0 r\nq1 Q0 d2 2 1.0 r\nq1 Q0 d3 3 0.5 r\n")
    assert main(["evaluate", str(qrels), str(run), "-m", "nDCG@10"]) == 2
    assert "is too large" in capsys.readouterr().err
    for qrels_form in _forms(grade):
        with pytest.raises(rg.InputError, match=f"grade {grade} of \\(q1, d2\\) is too large"):
            rg.evaluate(qrels_form, RUN, measures=["nDCG@10"])


def test_the_largest_grade_read_as_written_is_scored_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    grade = 2**53
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(f"q1 0 d1 1\nq1 0 d2 {grade}\nq1 0 d3 0\n")
    run = tmp_path / "run.txt"
    run.write_text("q1 Q0 d1 1 2.0 r\nq1 Q0 d2 2 1.0 r\nq1 Q0 d3 3 0.5 r\n")
    assert main(["evaluate", str(qrels), str(run), "-m", "nDCG@10", "--format", "json"]) == 0
    (record,) = json.loads(capsys.readouterr().out)
    assert 0.0 < record["value"] <= 1.0
    for qrels_form in _forms(grade):
        frame = rg.evaluate(qrels_form, RUN, measures=["nDCG@10"])
        value = float(frame.loc[frame.query_id == "all", "value"].iloc[0])
        assert value == pytest.approx(record["value"], abs=1e-12)
