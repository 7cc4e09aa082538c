"""`grade` over pairs whose answers are all stored (e.g. after `batch import`) writes the outputs
with no API key and no URL; a pair still to be sent asks for the key before anything is sent."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.cli.main import main
from grader.io.judgments import read_judgments
from tests.fakeserver import FakeServer
from tests.grade_data import GradeFiles, write_grade_files

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture
def files(tmp_path: Path) -> GradeFiles:
    return write_grade_files(tmp_path)


@pytest.fixture(autouse=True)
def no_llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RELGRADE_MODEL", "RELGRADE_PRICES"):
        monkeypatch.delenv(name, raising=False)


def _fill(files: GradeFiles, server: FakeServer, store: Path, *extra: str) -> None:
    """Grade through a server on this machine (it needs no key), as an import would store."""
    args = files.args("--base-url", server.base_url, "--store", store, "--quiet", "--model", MODEL)
    assert main([*args, *extra]) == 0


def test_outputs_from_a_full_store_need_no_key_and_no_url(
    fake_server: FakeServer, files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s.db"
    _fill(files, fake_server, store)
    asked = fake_server.counts["requests"]
    assert asked == files.n_pairs
    out, qrels = tmp_path / "j.jsonl", tmp_path / "llm.qrels"
    capsys.readouterr()
    args = files.args("--store", store, "--quiet", "--model", MODEL)
    code = main([*args, "--out", str(out), "--qrels-out", str(qrels)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "OPENAI_API_KEY" not in err
    assert f"graded 0, cached {files.n_pairs}, failed 0" in err
    assert fake_server.counts["requests"] == asked  # nothing sent
    judgments = read_judgments(out)
    assert len(judgments) == files.n_pairs and all(j.status == "ok" for j in judgments)
    assert len(qrels.read_text().splitlines()) == files.n_pairs


def test_a_pair_not_stored_asks_for_the_key_before_sending(
    fake_server: FakeServer, files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s.db"
    _fill(files, fake_server, store, "--depth", "2")
    asked = fake_server.counts["requests"]
    out = tmp_path / "j.jsonl"
    capsys.readouterr()
    code = main([*files.args("--store", store, "--quiet", "--model", MODEL), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert "OPENAI_API_KEY" in err
    assert fake_server.counts["requests"] == asked
    assert not out.exists()
