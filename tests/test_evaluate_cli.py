"""`relgrade evaluate`: output shapes, several runs, the missing-query policy, errors, help."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from grader.cli.main import main

QRELS = "q1 0 a 3\nq1 0 b 1\nq1 0 c 2\nq2 0 x 2\nq3 0 y 0\n"
BM25 = "q1 Q0 b 1 3.0 bm25\nq1 Q0 a 2 2.0 bm25\nq2 Q0 x 1 1.0 bm25\nq9 Q0 z 1 1.0 bm25\n"
DENSE = "q1 Q0 a 1 3.0 dense\nq1 Q0 c 2 2.0 dense\n"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    out = {}
    for name, text in {"qrels.txt": QRELS, "bm25.run": BM25, "dense.txt": DENSE}.items():
        (tmp_path / name).write_text(text)
        out[name] = str(tmp_path / name)
    return out


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, object]]:
    assert main(["evaluate", *argv, "--format", "json"]) == 0
    records: list[dict[str, object]] = json.loads(capsys.readouterr().out)
    return records


def test_json_records_with_mean_as_all(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    records = _json(capsys, files["qrels.txt"], files["bm25.run"], "-m", "RR", "P@1")
    assert records == [
        {"run": "bm25", "query_id": "all", "measure": "RR(rel=2)", "value": 0.5},
        {"run": "bm25", "query_id": "all", "measure": "P(rel=2)@1", "value": pytest.approx(1 / 3)},
    ]


def test_per_query_json_includes_missing_queries_as_zero(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    records = _json(capsys, files["qrels.txt"], files["bm25.run"], "-m", "RR", "--per-query")
    by_query = {r["query_id"]: r["value"] for r in records}
    # q1: b (grade 1) then a (grade 3) -> RR 0.5; q2 -> 1; q3 missing -> 0; q9 unjudged: ignored
    assert by_query == {"q1": 0.5, "q2": 1.0, "q3": 0.0, "all": pytest.approx(0.5)}


def test_trec_eval_missing_averages_answered_queries_only(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    args = [files["qrels.txt"], files["bm25.run"], "-m", "RR"]
    assert main(["evaluate", *args, "--format", "json", "--trec-eval-missing"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)[0]["value"] == pytest.approx(0.75)
    assert "1 left out of the mean" in captured.err


def test_several_runs_side_by_side_in_csv(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["evaluate", files["qrels.txt"], files["bm25.run"], files["dense.txt"], "-m", "nDCG@2"]
    assert main([*argv, "--format", "csv"]) == 0
    captured = capsys.readouterr()
    rows = list(csv.DictReader(io.StringIO(captured.out)))
    assert [(r["run"], r["query_id"], r["measure"]) for r in rows] == [
        ("bm25", "all", "nDCG@2"),
        ("dense", "all", "nDCG@2"),
    ]
    assert float(rows[1]["value"]) == pytest.approx(1 / 3)  # q1 ideal order, q2/q3 missing
    assert "dense: answers 1 of 3 qrels queries; 2 missing scored 0" in captured.err


def test_table_names_runs_measures_and_missing_queries(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["evaluate", files["qrels.txt"], files["bm25.run"], files["dense.txt"]]) == 0
    out = capsys.readouterr().out
    for text in ("bm25", "dense", "nDCG@10", "RR(rel=2)@10", "Judged@10"):
        assert text in out
    assert "bm25: answers 2 of 3 qrels queries; 1 missing scored 0" in out
    assert "1 run query not in the qrels ignored" in out


def test_per_query_table(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["evaluate", files["qrels.txt"], files["dense.txt"], "-m", "RR", "--per-query"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "dense: per query" in out and "q3" in out


def test_bad_measure_and_bad_file_exit_2_with_a_reason(
    files: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["evaluate", files["qrels.txt"], files["bm25.run"], "-m", "nDCG(rel=2)"]) == 2
    assert "takes no threshold" in capsys.readouterr().err
    bad = tmp_path / "bad.qrels"
    bad.write_text("q1 0 a 2.5\n")
    assert main(["evaluate", str(bad), files["bm25.run"]]) == 2
    err = capsys.readouterr().err
    assert "bad.qrels:1" in err and "not an integer" in err


def test_help_explains_measures_and_thresholds(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    out = capsys.readouterr().out
    for text in ("rel=N", "grade >= N", "RR(rel=2)@10", "ideal ranking", "trec_eval -c"):
        assert text in out


def test_a_run_answering_no_qrels_query_prints_n_a_or_null(
    files: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    stray = tmp_path / "stray.txt"
    stray.write_text("q9 Q0 z 1 1.0 x\n")
    args = ["evaluate", files["qrels.txt"], str(stray), "-m", "RR", "--trec-eval-missing"]
    assert main(args) == 0
    assert "n/a" in capsys.readouterr().out
    assert main([*args, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["value"] is None
    assert main([*args[:-1], "--format", "json"]) == 0  # default: missing queries score 0
    assert json.loads(capsys.readouterr().out)[0]["value"] == 0.0


def test_judgments_jsonl_as_qrels_leaves_failed_pairs_unjudged(
    files: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from grader.models import Judgment, JudgmentError
    from tests.helpers.judgments import write_judgments

    judgments = [
        Judgment(query_id="q1", doc_id="a", grade=3, status="ok", judge="j", key="k1"),
        Judgment(
            query_id="q1",
            doc_id="b",
            status="failed",
            judge="j",
            key="k2",
            error=JudgmentError(type="InvalidReply", message="no grade"),
        ),
    ]
    path = tmp_path / "judgments.jsonl"
    write_judgments(path, judgments)
    argv = ["evaluate", str(path), files["bm25.run"], "-m", "RR", "Judged@2", "--format", "json"]
    assert main([*argv, "--per-query"]) == 0
    captured = capsys.readouterr()
    values = {(r["query_id"], r["measure"]): r["value"] for r in json.loads(captured.out)}
    # bm25 ranks b (failed: unjudged, not relevant) above a (grade 3)
    assert values["q1", "RR(rel=2)"] == 0.5
    assert values["q1", "Judged@2"] == 0.5
    assert "1 failed judgments left unjudged" in captured.err


def test_human_grades_csv_as_qrels_gives_the_same_numbers(
    files: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = ["query_id,doc_id,grade,annotator"]
    rows += [f"{q},{d},{g},ann" for q, _, d, g in (line.split() for line in QRELS.splitlines())]
    csv_path = tmp_path / "human.csv"
    csv_path.write_text("\n".join(rows) + "\n")
    measures = ["-m", "nDCG@10", "RR", "AP", "--per-query"]
    from_qrels = _json(capsys, files["qrels.txt"], files["bm25.run"], *measures)
    from_csv = _json(capsys, str(csv_path), files["bm25.run"], *measures)
    assert from_csv == from_qrels
    assert any(r["value"] not in (0.0, None) for r in from_csv)


def test_clamped_and_ungraded_grades_are_noted_on_stderr(
    files: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from grader.models import Judgment
    from tests.helpers.judgments import write_judgments

    path = tmp_path / "judgments.jsonl"
    write_judgments(
        path, [Judgment(query_id="q1", doc_id="a", grade=3, status="ok", judge="j", key="k")]
    )
    path.write_text(path.read_text().replace('"grade":3', '"grade":9'))
    argv = ["evaluate", str(path), files["bm25.run"], "-m", "RR", "--format", "json"]
    assert main([*argv, "--clamp"]) == 0
    assert "1 grades outside 0..3 were clamped" in capsys.readouterr().err
    csv_path = tmp_path / "human.csv"
    csv_path.write_text("query_id,doc_id,grade\nq1,a,3\nq1,b,\nq2,x,\n")
    assert main(["evaluate", str(csv_path), files["bm25.run"], "-m", "RR"]) == 0
    assert "2 rows with an empty grade were left out" in capsys.readouterr().out


def test_qrels_with_a_bad_first_grade_names_the_grade_not_a_csv_header(
    files: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels = tmp_path / "bad.qrels"
    qrels.write_text("q1 0 a nan\n" + QRELS)
    assert main(["evaluate", str(qrels), files["bm25.run"]]) == 2
    err = capsys.readouterr().err
    assert "bad.qrels:1" in err and "'nan' is not an integer" in err and "header" not in err


def test_run_names_from_stems_folders_and_file_names() -> None:
    from grader.io.runs import run_names

    assert run_names(["x/bm25.txt", "y/dense.run.gz"]) == ["bm25", "dense"]
    assert run_names(["a/run.txt", "b/run.txt"]) == ["a/run", "b/run"]
    assert run_names(["r.txt", "r.txt.gz"]) == ["r.txt", "r.txt.gz"]
    assert run_names(["d/r.txt", "d/r.txt.gz"]) == ["r.txt", "r.txt.gz"]
    assert run_names(["r.txt", "r.txt"]) == ["r.txt", "r.txt'"]
