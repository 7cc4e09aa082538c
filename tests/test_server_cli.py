"""`relgrade grade` against a fake llama.cpp server (issue 24, points 2 and 7): the mode switch
printed once and kept in the call log and on every judgment; a model the server does not list
told; --max-context cutting documents."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.io.judgments import read_judgments
from tests.fake_flavours import llama_cpp
from tests.fakeserver import FakeServer
from tests.grade_data import write_grade_files


def test_grade_through_llama_cpp_prints_the_switch_once_and_stores_the_mode(
    fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_server.flavour = llama_cpp()
    files = write_grade_files(tmp_path)
    db, out = tmp_path / "s.db", tmp_path / "j.jsonl"
    args = files.args(
        "--base-url", fake_server.base_url, "--model", "smollm2", "--store", db, "--out", out
    )
    assert main([*args, "--quiet"]) == 0
    err = capsys.readouterr().err
    assert err.count("this run now uses json_object_schema") == 1
    assert "HTTP 500" in err
    assert err.count("not 'smollm2'") == 1  # the server lists fake-model only
    judgments = list(read_judgments(out))
    assert {(j.status, j.output_mode) for j in judgments} == {("ok", "json_object_schema")}
    with sqlite3.connect(db) as conn:
        rows = set(conn.execute("SELECT status, http_status, output_mode FROM calls"))
    assert ("mode_rejected", 500, "json_schema") in rows
    assert ("ok", 200, "json_object_schema") in rows


def test_max_context_flag_cuts_long_documents(fake_server: FakeServer, tmp_path: Path) -> None:
    fake_server.flavour = llama_cpp(n_ctx=900)
    files = write_grade_files(tmp_path, n_queries=1, depth=1)
    files.docs.write_text('{"doc_id": "d0", "text": "' + "cache eviction " * 600 + '"}\n')
    out = tmp_path / "j.jsonl"
    base = files.args("--base-url", fake_server.base_url, "--model", "fake-model", "--quiet")
    assert main([*base, "--store", str(tmp_path / "a.db"), "--out", str(out)]) == 1
    [failed] = read_judgments(out)
    assert failed.error is not None
    assert (
        main([*base, "--store", str(tmp_path / "b.db"), "--out", str(out), "--max-context", "900"])
        == 0
    )
    [judgment] = read_judgments(out)
    assert judgment.status == "ok" and judgment.truncated


def test_a_context_too_small_for_the_document_fails_without_a_request(
    fake_server: FakeServer, tmp_path: Path
) -> None:
    """With --max-context leaving the document (almost) nothing, the pair fails for good as
    ContextLengthExceeded and nothing is sent: an empty document would be graded, not this one."""
    files = write_grade_files(tmp_path, n_queries=1, depth=1)
    files.docs.write_text('{"doc_id": "d0", "text": "' + "cache eviction " * 600 + '"}\n')
    out = tmp_path / "j.jsonl"
    base = files.args("--base-url", fake_server.base_url, "--model", "fake-model", "--quiet")
    before = len(fake_server.requests)
    code = main(
        [*base, "--store", str(tmp_path / "a.db"), "--out", str(out), "--max-context", "300"]
    )
    [judgment] = read_judgments(out)
    assert code == 1 and judgment.status == "failed" and judgment.grade is None
    assert judgment.error is not None and judgment.error.type == "ContextLengthExceeded"
    assert "--max-context" in judgment.error.message
    assert len(fake_server.requests) == before  # no completion was asked for
