"""`relgrade grade` end to end: the lexical judge offline, and LLM judges through the real SDK
against the fake server on a real socket."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.cli.main import main
from grader.io.judgments import read_judgments
from grader.io.trec import read_qrels
from grader.store import Store
from tests.grade_data import GradeFiles, write_grade_files


@pytest.fixture
def files(tmp_path: Path) -> GradeFiles:
    return write_grade_files(tmp_path)


def test_lexical_grades_offline_and_writes_both_outputs(
    files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, qrels = tmp_path / "j.jsonl", tmp_path / "q.txt"
    code = main(
        files.args(
            "--judge", "lexical", "--store", tmp_path / "s.db", "--out", out, "--qrels-out", qrels
        )
    )
    assert code == 0
    judgments = read_judgments(out)
    assert len(judgments) == files.n_pairs and all(j.status == "ok" for j in judgments)
    frame = read_qrels(qrels)
    assert len(frame) == files.n_pairs
    assert sorted(frame["grade"]) == sorted(j.grade for j in judgments)
    err = capsys.readouterr().err
    assert f"graded {files.n_pairs}, cached 0, failed 0" in err


def test_lexical_rerun_is_all_cached(
    files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = files.args("--judge", "lexical", "--store", tmp_path / "s.db", "--quiet")
    assert main(args) == 0
    capsys.readouterr()
    assert main(args) == 0
    assert f"graded 0, cached {files.n_pairs}, failed 0" in capsys.readouterr().err


def test_depth_limits_the_pairs(files: GradeFiles, tmp_path: Path) -> None:
    assert main(files.args("--judge", "lexical", "--store", tmp_path / "s.db", "--depth", "2")) == 0
    with Store(tmp_path / "s.db") as store:
        assert store.count() == 6


def test_dry_run_creates_no_store(
    files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(files.args("--judge", "lexical", "--store", tmp_path / "s.db", "--dry-run"))
    assert code == 0
    assert not (tmp_path / "s.db").exists()
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == files.n_pairs
    assert f"would send {files.n_pairs} requests" in captured.err
    assert "nothing was sent" in captured.err


def test_missing_key_for_a_remote_endpoint_names_the_variable(
    files: GradeFiles,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code = main(files.args("--store", tmp_path / "s.db", "--base-url", "https://example.com/v1"))
    assert code == 2
    assert "OPENAI_API_KEY" in capsys.readouterr().err


def test_lexical_refuses_a_model_flag(files: GradeFiles, tmp_path: Path) -> None:
    assert main(files.args("--judge", "lexical", "--model", "x", "--store", tmp_path / "s")) == 2
