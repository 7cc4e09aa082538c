"""`relgrade calibrate --fit-lexical`: thresholds fitted on human grades, written where asked
(or where the grading engine reads by default), and read back by the lexical judge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.judges.lexical.config import default_config_path, load_lexical_config


def _inputs(tmp_path: Path) -> tuple[Path, Path, Path]:
    queries = tmp_path / "queries.tsv"
    queries.write_text("q1\tsolar panel efficiency\nq2\tpython list sorting\n")
    docs = {
        "a": "solar panel efficiency rises with solar panel cooling and panel efficiency",
        "b": "solar panel prices fell",
        "c": "the weather was nice",
        "d": "python list sorting uses timsort; sorting a python list is stable",
        "e": "python list comprehension",
        "f": "cooking pasta at home",
    }
    docs_path = tmp_path / "docs.jsonl"
    docs_path.write_text(
        "".join(json.dumps({"doc_id": k, "text": v}) + "\n" for k, v in docs.items())
    )
    human = tmp_path / "human.csv"
    human.write_text("query_id,doc_id,grade\nq1,a,3\nq1,b,1\nq1,c,0\nq2,d,3\nq2,e,1\nq2,f,0\n")
    return human, queries, docs_path


def test_fit_lexical_writes_thresholds_that_reproduce_the_human_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    human, queries, docs = _inputs(tmp_path)
    out = tmp_path / "lexical.toml"
    argv = ["calibrate", "--fit-lexical", "--human", str(human), "--queries", str(queries)]
    argv += ["--docs", str(docs), "--lexical-out", str(out), "--format", "json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["n"] == 6 and result["path"] == str(out)
    config = load_lexical_config(out)
    assert list(config.thresholds) == result["thresholds"]
    assert config.thresholds[0] <= config.thresholds[1] <= config.thresholds[2]
    # the grades are perfectly ordered by term overlap here, so the fit should get the order
    assert result["weighted_kappa_quadratic"] > 0.8


def test_fit_lexical_defaults_to_the_file_the_grading_engine_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    human, queries, docs = _inputs(tmp_path)
    shipped = default_config_path()
    shipped_before = shipped.read_bytes()
    monkeypatch.delenv("RELGRADE_LEXICAL_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    argv = ["calibrate", "--fit-lexical", "--human", str(human), "--queries", str(queries)]
    assert main([*argv, "--docs", str(docs)]) == 0
    printed = capsys.readouterr().out
    assert "written to relgrade-lexical.toml" in printed
    assert "grade >= 3 when score >=" in printed
    fitted = load_lexical_config(tmp_path / "relgrade-lexical.toml")
    # The grading engine, given no --lexical-config, now reads the fitted file ...
    assert load_lexical_config().thresholds == fitted.thresholds
    # ... and the shipped default is untouched.
    assert shipped.read_bytes() == shipped_before


def test_fit_lexical_needs_queries_and_docs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    human, _, _ = _inputs(tmp_path)
    assert main(["calibrate", "--fit-lexical", "--human", str(human)]) == 2
    assert "--queries and --docs" in capsys.readouterr().err


def test_an_undefined_kappa_is_left_out_of_the_provenance_not_written_as_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every person gave the same grade: kappa is undefined, shown n/a, never saved as 0.0."""
    _, queries, docs = _inputs(tmp_path)
    human = tmp_path / "same.csv"
    human.write_text("query_id,doc_id,grade\nq1,a,2\nq1,b,2\nq2,d,2\nq2,e,2\n")
    out = tmp_path / "lexical.toml"
    argv = ["calibrate", "--fit-lexical", "--human", str(human), "--queries", str(queries)]
    argv += ["--docs", str(docs), "--lexical-out", str(out)]
    assert main([*argv, "--format", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["weighted_kappa_quadratic"] is None
    provenance = load_lexical_config(out).provenance
    assert "weighted_kappa_quadratic" not in provenance and provenance["pairs"] == 4
    assert main(argv) == 0
    assert "human ones: n/a" in capsys.readouterr().out
