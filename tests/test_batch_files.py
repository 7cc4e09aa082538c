"""`relgrade batch export` -> an engine (tests/fake_engine.py: vLLM run-batch's output shape,
answering through the fake server) -> `relgrade batch import`, then grade's outputs from the
store, compared with live grading of the same pairs; an import twice, or killed and run again."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from grader.cli.main import main
from grader.store.store import Store
from tests.fakeserver import FakeServer, faults
from tests.grade_data import GradeFiles, write_grade_files
from tests.helpers.batch_cli import MODEL, cli_export, custom_ids, http_engine, with_a_copied_doc
from tests.helpers.batch_import import engine_results, export_pairs
from tests.helpers.judgments import stored_judgments


def _judgments(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return {(r["query_id"], r["doc_id"]): r for r in rows}


def _table(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT * FROM judgments ORDER BY key").fetchall()


@pytest.fixture
def files(tmp_path: Path) -> GradeFiles:
    return with_a_copied_doc(write_grade_files(tmp_path, n_queries=4, depth=5))


@pytest.mark.slow
def test_round_trip_equals_live_grading(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = ["--base-url", fake_server.base_url]
    live = ["--store", str(tmp_path / "live.db"), *url, *MODEL, "--quiet", "--depth", "6"]
    outs = ["--out", str(tmp_path / "live.jsonl"), "--qrels-out", str(tmp_path / "live.qrels")]
    assert main(files.args(*live, *outs)) == 0
    live_requests = [r for r in fake_server.requests]
    fake_server.reset()

    db = tmp_path / "batch.db"
    requests = cli_export(files, db, tmp_path / "out", "--depth", "6", "--batch-max-requests", "8")
    lines = [json.loads(x) for p in requests for x in p.read_text().splitlines()]
    assert [len(p.read_text().splitlines()) for p in requests] == [8, 8, 4]  # 21 pairs, 20 texts
    assert {x["url"] for x in lines} == {"/v1/chat/completions"}
    # Each request is exactly what live grading sent for the pair.
    assert sorted(json.dumps(x["body"], sort_keys=True) for x in lines) == sorted(
        json.dumps(b, sort_keys=True) for b in live_requests
    )

    # The engine: one error line, one reply the validator refuses, a truncated last line.
    bad = custom_ids(requests[0])[2]
    fake_server.enqueue(faults.bad_grade(7))  # the first line of file 1 gets grade 7
    results = http_engine(fake_server, requests[:2], tmp_path / "res", fail_ids=[bad])
    results += http_engine(fake_server, requests[2:], tmp_path / "res", truncate_last=True)
    capsys.readouterr()
    assert main(["batch", "import", "--store", str(db), str(tmp_path / "res"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "imported 19 lines of 3 files: 17 ok, 2 failed" in err
    assert "1 missing" in err and "last line cut short" in err
    with Store(db) as store:
        failed = {j.error.type for j in stored_judgments(store, status="failed") if j.error}
        assert store.count(status="failed") == 3 and store.count(status="ok") == 17
    assert failed == {"Batch:http_400", "InvalidReply", "Batch:missing"}
    conn = sqlite3.connect(db)
    unlisted = conn.execute(
        "SELECT COUNT(*) FROM judgments j WHERE NOT EXISTS (SELECT 1 FROM judgment_pairs p"
        " WHERE p.key = j.key AND p.query_id = j.query_id AND p.doc_id = j.doc_id)"
    ).fetchone()[0]
    conn.close()
    assert unlisted == 0  # the export listed each line's id pair; the import relies on it

    # batch status: lines that came back
    assert main(["batch", "status", "--store", str(db), "--exports", "--format", "json"]) == 0
    (status,) = json.loads(capsys.readouterr().out)
    assert (status["lines"], status["pairs"], status["returned"]) == (20, 21, 20)
    assert (status["returned_failed"], status["files"]) == (3, 3)

    # Re-export: only the three without a grade.
    again = cli_export(files, db, tmp_path / "out2", "--depth", "6")
    assert sum(len(p.read_text().splitlines()) for p in again) == 3

    fake_server.reset()
    reask = ["batch", "import", "--store", str(db), str(tmp_path / "res"), "--reask", *url]
    assert main([*reask, "--quiet"]) == 1
    # The refused and the missing line; not the one past the context (it would fail again).
    assert fake_server.counts["requests"] == 2
    assert "1 not asked (refused for good" in capsys.readouterr().err

    fake_server.reset()
    ours = ["--store", str(db), *url, *MODEL, "--quiet", "--depth", "6"]
    outs = ["--out", str(tmp_path / "b.jsonl"), "--qrels-out", str(tmp_path / "b.qrels")]
    assert main(files.args(*ours, *outs)) == 0
    assert fake_server.counts["requests"] == 1  # the rest came from the store
    assert (tmp_path / "b.qrels").read_text() == (tmp_path / "live.qrels").read_text()
    a, b = _judgments(tmp_path / "live.jsonl"), _judgments(tmp_path / "b.jsonl")
    assert len(a) == 21 and a.keys() == b.keys()
    same = ("grade", "status", "reason", "key", "distribution", "expected_grade", "prompt")
    for pair in a:
        assert {k: a[pair][k] for k in same} == {k: b[pair][k] for k in same}, pair


def test_import_twice_changes_nothing(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "b.db"
    requests = cli_export(files, db, tmp_path / "out")
    results = http_engine(
        fake_server, requests, tmp_path / "res", fail_ids=[custom_ids(requests[0])[0]]
    )
    assert main(["batch", "import", "--store", str(db), *map(str, results), "--quiet"]) == 1
    first = _table(db)
    capsys.readouterr()
    assert main(["batch", "import", "--store", str(db), *map(str, results), "--quiet"]) == 1
    assert "0 ok, 0 failed, 0 missing (no results line) stored by this import; 20 already" in (
        capsys.readouterr().err
    )
    assert _table(db) == first  # not one row rewritten, not even a timestamp


def test_a_repeated_text_across_a_file_boundary_is_exported_once(
    files: GradeFiles, tmp_path: Path
) -> None:
    """q0/d-copy repeats q0/d0's texts five lines later; with 3 lines a file they fall in
    different files, and the second is still the same request (one line, both id pairs)."""
    db = tmp_path / "x.db"
    requests = cli_export(files, db, tmp_path / "out", "--depth", "6", "--batch-max-requests", "3")
    keys = [cid for p in requests for cid in custom_ids(p)]
    assert len(keys) == len(set(keys)) == 20  # 21 pairs, 20 texts
    with Store(db) as store:
        assert store.count() == 0
    with sqlite3.connect(db) as conn:
        pairs = conn.execute("SELECT COUNT(*) FROM judgment_pairs").fetchone()[0]
    conn.close()
    assert pairs == 21


@pytest.mark.slow
def test_sigkill_during_import_then_import_again(tmp_path: Path) -> None:
    db, requests = export_pairs(tmp_path, 6000)
    results = engine_results(FakeServer(), requests, tmp_path / "res", bad=set())
    env = {**os.environ, "RELGRADE_TEST_IMPORT_PAUSE": "30"}
    cmd = [sys.executable, "-m", "grader.cli.main", "batch", "import", "--store", str(db)]
    child = subprocess.Popen([*cmd, *map(str, results)], env=env, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    stored = 0
    while time.monotonic() < deadline and stored == 0:
        time.sleep(0.1)
        with sqlite3.connect(db) as conn:
            stored = conn.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL
    assert 0 < stored < 6000  # killed with the first chunk stored, the rest not

    again = subprocess.run([*cmd, *map(str, results)], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert f"{6000 - stored:,} ok, 0 failed, 0 missing" in again.stderr
    assert f"{stored:,} already stored" in again.stderr
    with Store(db) as store:
        assert store.count(status="ok") == 6000 and store.count() == 6000
    with sqlite3.connect(db) as conn:
        outcomes = conn.execute("SELECT outcome, COUNT(*) FROM export_lines GROUP BY 1").fetchall()
    assert outcomes == [("ok", 6000)]
