"""`relgrade evaluate` reads every file trec_eval reads and says what it decided.

Qrels grades are any integer; the default threshold comes from the qrels (1 for binary qrels,
said on stderr); a threshold above every grade, and a bare name read as rel=2, are said on
stderr; run lines may carry extra columns, runs and qrels `#` comments, and `-` reads a run from
stdin; empty inputs are errors (qrels) or warnings (runs), never a silent 0.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.errors import InputError
from grader.io.trec import read_qrels, read_run
from tests.grade_data import write_grade_files

GRADED = "q1 0 a 3\nq1 0 b 1\nq1 0 c 2\nq2 0 x 2\nq2 0 y 0\n"
BINARY = "q1 0 a 1\nq1 0 b 0\nq1 0 c 1\nq2 0 x 1\nq2 0 y 0\n"
RUN = "q1 Q0 b 1 3.0 bm25\nq1 Q0 a 2 2.0 bm25\nq1 Q0 c 3 1.0 bm25\nq2 Q0 y 1 2.0 bm25\n"


def _write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def _evaluate(
    capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[dict[str, float | None], str]:
    """({measure: mean} of the only run, stderr) from `evaluate --format json`."""
    assert main(["evaluate", *argv, "--format", "json"]) == 0
    captured = capsys.readouterr()
    records = json.loads(captured.out)
    return {r["measure"]: r["value"] for r in records if r["query_id"] == "all"}, captured.err


# --- qrels grades are any integer --------------------------------------------------------------


def test_trec_web_grades_minus_2_to_4_are_read_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels = _write(tmp_path / "web.qrels", "q1 0 a -2\nq1 0 b 4\nq1 0 c 1\nq1 0 d 0\n")
    run = _write(tmp_path / "r.run", "q1 Q0 a 1 4 t\nq1 Q0 b 2 3 t\nq1 Q0 c 3 2 t\n")
    assert read_qrels(qrels, any_grade=True)["grade"].tolist() == [-2, 4, 1, 0]
    means, err = _evaluate(capsys, qrels, run, "-m", "RR(rel=3)", "P(rel=1)@3", "nDCG@3")
    # grade 4 is relevant at rel=3 (rank 2); -2 is never relevant; nDCG gains 4 at rank 2 and
    # 1 at rank 3 (the -2 at rank 1 gains 0, as trec_eval's default gains give it)
    assert means["RR(rel=3)"] == 0.5
    assert means["P(rel=1)@3"] == pytest.approx(2 / 3)
    ideal = 4 + 1 / 1.584962500721156
    assert means["nDCG@3"] == pytest.approx((4 / 1.584962500721156 + 1 / 2) / ideal)
    assert "outside" not in err


def test_a_threshold_of_4_on_trec_web_grades_equals_trec_eval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pytrec_eval

    qrels = _write(tmp_path / "web.qrels", "q1 0 a 4\nq1 0 b 3\nq1 0 c 4\nq1 0 d 0\n")
    run = _write(tmp_path / "r.run", "q1 Q0 b 1 4 t\nq1 Q0 a 2 3 t\nq1 Q0 d 3 2 t\n")
    means, err = _evaluate(capsys, qrels, run, "-m", "RR(rel=4)", "P(rel=4)@3", "AP(rel=4)")
    ref = pytrec_eval.RelevanceEvaluator(
        {"q1": {"a": 4, "b": 3, "c": 4, "d": 0}},
        {"recip_rank", "P_3", "map"},
        relevance_level=4,
    ).evaluate({"q1": {"b": 4.0, "a": 3.0, "d": 2.0}})["q1"]
    assert means["RR(rel=4)"] == pytest.approx(ref["recip_rank"], abs=1e-9) == 0.5
    assert means["P(rel=4)@3"] == pytest.approx(ref["P_3"], abs=1e-9)
    assert means["AP(rel=4)"] == pytest.approx(ref["map"], abs=1e-9) == 0.25
    assert "above every grade" not in err


def test_qrels_grade_4_no_longer_refused_but_llm_and_human_grades_keep_0_to_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _write(tmp_path / "r.run", RUN)
    qrels = _write(tmp_path / "four.qrels", "q1 0 a 4\n")
    assert main(["evaluate", qrels, run, "-m", "RR"]) == 0
    capsys.readouterr()
    human = _write(tmp_path / "human.csv", "query_id,doc_id,grade\nq1,a,4\n")
    assert main(["evaluate", human, run, "-m", "RR"]) == 2
    err = capsys.readouterr().err
    assert "human.csv:2" in err and "outside 0..3" in err and "--clamp" in err
    means, err = _evaluate(capsys, human, run, "-m", "RR", "--clamp")
    assert means["RR(rel=2)"] == 0.5 and "clamped" in err
    # grade, calibrate and sample read qrels on the 0..3 scale, as before
    with pytest.raises(InputError, match=r"outside 0\.\.3"):
        read_qrels(qrels)


def test_clamp_with_trec_qrels_says_it_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels = _write(tmp_path / "web.qrels", "q1 0 a 4\nq1 0 b -2\nq1 0 c 3\n")
    run = _write(tmp_path / "r.run", RUN)  # q1: b, a, c
    means, err = _evaluate(capsys, qrels, run, "-m", "nDCG", "--clamp")
    log3 = 1.584962500721156
    assert means["nDCG"] == pytest.approx((4 / log3 + 3 / 2) / (4 + 3 / log3))  # 4 kept, not 3
    assert "TREC qrels keep every grade" in err


# --- thresholds: inferred, and said -------------------------------------------------------------


def test_binary_qrels_default_to_rel_1_printed_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels = _write(tmp_path / "binary.qrels", BINARY)
    run = _write(tmp_path / "r.run", RUN)
    means, err = _evaluate(capsys, qrels, run)  # the default measures
    assert list(means) == [
        "nDCG@10",
        "RR(rel=1)@10",
        "P(rel=1)@10",
        "R(rel=1)@100",
        "AP(rel=1)",
        "Judged@10",
    ]
    # q1: b (0), a (1), c (1) -> RR 1/2; q2: y (0), x not returned -> 0
    assert means["RR(rel=1)@10"] == pytest.approx(0.25)
    assert means["P(rel=1)@10"] == pytest.approx(0.1)
    notes = [line for line in err.splitlines() if "binary qrels" in line]
    assert len(notes) == 1 and "rel=1" in notes[0]
    assert "no qrels grade reaches" not in err


def test_graded_qrels_keep_rel_2_without_a_binary_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels = _write(tmp_path / "graded.qrels", GRADED)
    run = _write(tmp_path / "r.run", RUN)
    means, err = _evaluate(capsys, qrels, run)
    assert "RR(rel=2)@10" in means and "binary qrels" not in err
    assert "ir_measures" not in err  # nobody typed a bare name


def test_threshold_above_every_grade_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels = _write(tmp_path / "binary.qrels", BINARY)
    run = _write(tmp_path / "r.run", RUN)
    means, err = _evaluate(capsys, qrels, run, "-m", "RR(rel=3)", "P(rel=2)@5", "RR")
    assert means == {"RR(rel=3)": 0.0, "P(rel=2)@5": 0.0, "RR(rel=1)": 0.25}
    lines = [line for line in err.splitlines() if "no qrels grade reaches" in line]
    assert len(lines) == 1
    assert "RR(rel=3)" in lines[0] and "P(rel=2)@5" in lines[0] and "highest grade 1" in lines[0]
    assert "RR(rel=1)" not in lines[0]


def test_bare_names_on_graded_qrels_get_one_line_about_ir_measures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels = _write(tmp_path / "graded.qrels", GRADED)
    run = _write(tmp_path / "r.run", RUN)
    means, err = _evaluate(capsys, qrels, run, "-m", "RR", "P@10", "AP", "nDCG@10", "map")
    # map is trec_eval's name: AP at trec_eval's level 1, said on a line of its own
    assert set(means) == {"RR(rel=2)", "P(rel=2)@10", "AP(rel=2)", "nDCG@10", "AP(rel=1)"}
    lines = [line for line in err.splitlines() if "ir_measures" in line]
    assert len(lines) == 1
    assert "RR, P@10, AP:" in lines[0] and "rel=1" in lines[0]
    assert "trec_eval -l 1): map = AP(rel=1)" in err
    _, err = _evaluate(capsys, qrels, run, "-m", "RR(rel=2)", "nDCG@10")
    assert "ir_measures" not in err


# --- run and qrels files as trec_eval reads them ------------------------------------------------


@pytest.mark.parametrize("sep", [" ", "\t", " \t"], ids=["spaces", "tabs", "mixed"])
def test_extra_columns_and_comments_read_like_trec_eval(
    tmp_path: Path, sep: str, capsys: pytest.CaptureFixture[str]
) -> None:
    clean_qrels = _write(tmp_path / "clean.qrels", GRADED)
    clean_run = _write(tmp_path / "clean.run", RUN)
    body = "".join(sep.join(line.split()) + f"{sep}extra{sep}7\n" for line in RUN.splitlines())
    lines = body.splitlines(keepends=True)
    # comments: a header, one that has six words with a number fifth, one indented
    noisy = "# run by bm25 k1=0.9\n" + lines[0] + "#q1 Q0 zz 1 9.0 t\n" + "".join(lines[1:])
    noisy += "   # trailing comment\n"
    noisy_run = _write(tmp_path / "noisy.run", noisy)
    noisy_qrels = _write(tmp_path / "noisy.qrels", "# graded by people\n" + GRADED + "# end\n")
    measures = ["-m", "nDCG@10", "RR", "P@2", "AP", "--per-query"]
    assert main(["evaluate", clean_qrels, clean_run, *measures, "--format", "json"]) == 0
    expected = [{**r, "run": "x"} for r in json.loads(capsys.readouterr().out)]
    assert main(["evaluate", noisy_qrels, noisy_run, *measures, "--format", "json"]) == 0
    got = [{**r, "run": "x"} for r in json.loads(capsys.readouterr().out)]
    assert got == expected and any(r["value"] for r in got)
    frame = read_run(noisy_run)
    assert list(frame.columns) == ["query_id", "doc_id", "score", "rank"]
    assert "zz" not in set(frame["doc_id"]) and len(frame) == 4


def test_errors_after_comments_name_the_file_line(tmp_path: Path) -> None:
    run = _write(tmp_path / "bad.run", "# header\nq1 Q0 a 1 1.0 t x\n# note\nq1 Q0 b 2 high t\n")
    with pytest.raises(InputError, match="not a finite number") as info:
        read_run(run)
    assert info.value.line == 4
    qrels = _write(tmp_path / "bad.qrels", "# header\n\nq1 0 a 1\nq1 0 b one\n")
    with pytest.raises(InputError, match="not an integer") as info:
        read_qrels(qrels, any_grade=True)
    assert info.value.line == 4


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("q1 Q0 a 1 1.0\n", 1),
        ("# header\nq1 Q0 a 1 1.0 t\nq1 Q0 b 2 0.5\n", 3),
        ("q1 Q0 a 1 1.0 t extra\nq1 Q0 b 2\n", 2),
    ],
    ids=["first", "after-comment", "after-extra"],
)
def test_a_run_line_with_fewer_than_six_columns_is_an_error(
    tmp_path: Path, text: str, line: int, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels = _write(tmp_path / "q.qrels", GRADED)
    run = _write(tmp_path / "short.run", text)
    assert main(["evaluate", qrels, run]) == 2
    err = capsys.readouterr().err
    assert f"short.run:{line}" in err and "expected 6 columns" in err


def test_qrels_with_extra_columns_stay_an_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="expected 4 columns") as info:
        read_qrels(_write(tmp_path / "q.qrels", "q1 0 a 1\nq1 0 b 1 x\n"), any_grade=True)
    assert info.value.line == 2


def test_dash_reads_the_run_from_stdin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    qrels = _write(tmp_path / "q.qrels", GRADED)
    run = _write(tmp_path / "bm25.run", RUN)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(RUN.encode())))
    argv = ["evaluate", qrels, run, "-", "-m", "RR", "nDCG@10", "--format", "json"]
    assert main(argv) == 0
    records = json.loads(capsys.readouterr().out)
    by_run: dict[str, dict[str, float]] = {}
    for r in records:
        by_run.setdefault(r["run"], {})[r["measure"]] = r["value"]
    assert set(by_run) == {"bm25", "stdin"}
    assert by_run["stdin"] == by_run["bm25"]
    bad = "q1 Q0 a 1 1.0 t\nq1 Q0 b 2\n"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(bad.encode())))
    assert main(["evaluate", qrels, "-"]) == 2
    assert "stdin:2: expected 6 columns" in capsys.readouterr().err
    assert main(["evaluate", qrels, "-", "-"]) == 2
    assert "given twice" in capsys.readouterr().err


# --- empty inputs --------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "\n\n", "# qrels of nothing\n# still nothing\n"])
def test_qrels_without_judgments_is_an_error(
    tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels = _write(tmp_path / "none.qrels", text)
    run = _write(tmp_path / "r.run", RUN)
    assert main(["evaluate", qrels, run]) == 2
    err = capsys.readouterr().err
    assert "no judgments" in err and "none.qrels" in err


def test_an_empty_run_or_one_answering_no_query_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels = _write(tmp_path / "q.qrels", GRADED)
    good = _write(tmp_path / "good.run", RUN)
    empty = _write(tmp_path / "empty.run", "# nothing retrieved\n")
    other = _write(tmp_path / "other.run", "t9 Q0 a 1 1.0 x\n")
    means, err = _evaluate(capsys, qrels, empty, "-m", "RR")
    assert means == {"RR(rel=2)": 0.0}
    assert "warning: run empty is empty" in err
    assert main(["evaluate", qrels, good, other, "-m", "RR", "--format", "csv"]) == 0
    err = capsys.readouterr().err
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1
    assert "run other answers none of the 2 qrels queries" in warnings[0] and "'t9'" in warnings[0]


def test_grade_with_an_empty_run_says_it_holds_no_result(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_grade_files(tmp_path)
    files.run.write_text("# nothing\n")
    out = tmp_path / "j.jsonl"
    argv = files.args("--judge", "lexical", "--store", tmp_path / "s.db", "--out", out)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "found no pairs to grade" in err and "run.txt" in err
    assert "the run holds no result (empty, or only comments)" in err
    assert not out.exists()
