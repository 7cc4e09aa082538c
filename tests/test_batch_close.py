"""`relgrade batch close` after an engine died (issue 38, point 3): an export run by an engine
killed between files (and in the middle of one) is imported, closed and exported again; the new
export holds exactly the pairs with no ok answer, and once it is run and imported every pair is
graded once, with the server's grade, and `grade` sends nothing. `batch status --files` tells
each request file's state, and a result that comes back after the close is taken without a
second grade, counted as paid twice."""

from __future__ import annotations

import json
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
from tests import fake_engine
from tests.fakeserver import FakeServer
from tests.fakeserver_replies import default_grade
from tests.grade_data import GradeFiles, write_grade_files
from tests.helpers.batch_cli import MODEL, cli_export, cli_import, custom_ids
from tests.helpers.judgments import stored_judgments


@pytest.fixture
def files(tmp_path: Path) -> GradeFiles:
    return write_grade_files(tmp_path, n_queries=4, depth=5)  # 20 pairs, 20 texts


def _engine(server: FakeServer, requests: list[Path], out: Path, **kw: Any) -> list[Path]:
    """A stand-in for vllm run-batch: each file's lines answered with the fake server's reply
    (no HTTP), written in run-batch's output shape."""
    out.mkdir(exist_ok=True)
    results = []
    for path in requests:
        target = out / f"{path.stem}.results.jsonl"
        fake_engine.run_batch(path, target, lambda body: (200, server.completion_for(body), None))
        results.append(target)
    return results


def _expected(requests: list[Path]) -> dict[str, int]:
    """The server's grade of each exported request, by content key."""
    found = {}
    for path in requests:
        for raw in path.read_text().splitlines():
            line = json.loads(raw)
            found[line["custom_id"].split(":", 2)[2]] = default_grade(line["body"])
    return found


def _status(db: Path, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    capsys.readouterr()
    assert main(["batch", "status", "--store", str(db), "--files", "--format", "json"]) == 0
    rows: list[dict[str, Any]] = json.loads(capsys.readouterr().out)
    return rows


def test_close_after_an_engine_killed_between_files_grades_every_pair_once(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    requests = cli_export(files, db, tmp_path / "a", "--batch-max-requests", "6")
    assert [len(custom_ids(p)) for p in requests] == [6, 6, 6, 2]
    expected = _expected(requests)
    export_id = custom_ids(requests[0])[0].split(":")[1]

    # The engine ran file 1 whole, died 3 lines into file 2, never reached files 3 and 4.
    results = _engine(fake_server, requests[:1], tmp_path / "r1")
    partial = tmp_path / "r1" / f"{requests[1].stem}.results.jsonl"
    fake_engine.run_batch(
        requests[1], partial, lambda b: (200, fake_server.completion_for(b), None), stop_after=3
    )
    assert cli_import(db, *results, partial) == 1  # file 2's other 3 lines are missing
    states = _status(db, capsys)
    assert [(s["file"], s["state"], s["waiting"]) for s in states] == [
        (1, "answered", 0), (2, "answered", 0), (3, "untouched", 6), (4, "untouched", 2)
    ]  # fmt: skip
    assert sum(s["close_would_mark_missing"] for s in states) == 8

    # Before the close, export again writes only file 2's 3 missing: the 8 waiting pairs are
    # left out, and it says what to do.
    early = cli_export(files, db, tmp_path / "b")
    assert sum(len(custom_ids(p)) for p in early) == 3
    err = capsys.readouterr().err
    assert f"8 pairs left out: their requests wait in export {export_id}" in err
    assert f"relgrade batch close --store {db} {export_id}" in err
    # That engine is dead, and the early export is never run: both are closed.
    early_id = custom_ids(early[0])[0].split(":")[1]
    assert main(["batch", "close", "--store", str(db), export_id, early_id]) == 0
    err = capsys.readouterr().err
    assert f"closed export {export_id}: 8 requests without a results line stored" in err
    assert f"closed export {early_id}: 3 requests" in err
    assert all(s["state"] == "answered" for s in _status(db, capsys))

    with Store(db) as store:
        ok = {j.key for j in stored_judgments(store, status="ok")}
    again = cli_export(files, db, tmp_path / "c")
    keys = [cid.split(":", 2)[2] for p in again for cid in custom_ids(p)]
    assert len(ok) == 9 and sorted(keys) == sorted(set(expected) - ok)  # exactly the 11 left

    results = _engine(fake_server, again, tmp_path / "r2")
    capsys.readouterr()
    assert cli_import(db, *results) == 0
    assert "11 ok, 0 failed, 0 missing" in capsys.readouterr().err
    with Store(db) as store:
        graded = {j.key: j.grade for j in stored_judgments(store, status="ok")}
        assert store.count() == 20
    assert graded == expected

    _late_answers_are_paid_twice_never_graded_twice(
        db, _engine(fake_server, requests[2:], tmp_path / "r3"), expected, capsys
    )
    fake_server.reset()
    args = ["--store", str(db), "--base-url", fake_server.base_url, *MODEL, "--quiet"]
    assert main(files.args(*args)) == 0
    assert fake_server.counts["requests"] == 0


def _late_answers_are_paid_twice_never_graded_twice(
    db: Path, late: list[Path], expected: dict[str, int], capsys: pytest.CaptureFixture[str]
) -> None:
    """The dead engine's files come back after all: taken, never a second grade, and counted
    as paid twice; imported again, they pay nothing more."""
    assert cli_import(db, *late) == 0
    err = capsys.readouterr().err
    assert "0 ok, 0 failed, 0 missing (no results line) stored by this import; 8 already" in err
    assert "8 answers paid twice" in err
    with Store(db) as store:
        assert {j.key: j.grade for j in stored_judgments(store, status="ok")} == expected
    assert cli_import(db, *late) == 0
    assert "0 answers paid twice" in capsys.readouterr().err


def test_close_names_exports_by_file_or_folder_and_refuses_others(
    files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    requests = cli_export(files, db, tmp_path / "a")
    assert main(["batch", "close", "--store", str(db), str(requests[0])]) == 0
    assert "20 requests without a results line stored as missing" in capsys.readouterr().err
    assert main(["batch", "close", "--store", str(db), str(tmp_path / "a")]) == 0
    assert "0 requests without a results line" in capsys.readouterr().err  # closed already
    assert main(["batch", "close", "--store", str(db), "ffffffffffff"]) == 2
    assert "names no export of this store" in capsys.readouterr().err
    with sqlite3.connect(db) as conn:
        outcomes = conn.execute("SELECT outcome, COUNT(*) FROM export_lines GROUP BY 1").fetchall()
    conn.close()
    assert outcomes == [("failed", 20)]
    with Store(db) as store:
        errors = {j.error.type for j in stored_judgments(store, status="failed") if j.error}
    assert errors == {"Batch:missing"}


_NODE = """
import sys, time
from pathlib import Path
from tests import fake_engine

base_url, out, pause = sys.argv[1], Path(sys.argv[2]), float(sys.argv[3])
for i, name in enumerate(sys.argv[4:]):
    if i:
        time.sleep(pause)  # between files: where this node is killed
    path = Path(name)
    target = out / f"{path.stem}.results.jsonl"
    fake_engine.run_batch(path, target, fake_engine.http_answer(base_url))
"""


@pytest.mark.slow
def test_two_engine_processes_one_killed_between_files_then_close(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two stand-in run-batch processes (nodes) share the request files over HTTP; node B is
    killed (SIGKILL) after its first file. Import, close, export again, run, import: every pair
    graded once, with the server's grade, and `grade` sends nothing."""
    db = tmp_path / "s.db"
    requests = cli_export(files, db, tmp_path / "a", "--batch-max-requests", "5")
    expected = _expected(requests)
    out = tmp_path / "results"
    out.mkdir()
    root = Path(__file__).resolve().parents[1]

    def node(pause: float, share: list[Path]) -> subprocess.Popen[bytes]:
        args = [fake_server.base_url, str(out), str(pause), *map(str, share)]
        return subprocess.Popen([sys.executable, "-c", _NODE, *args], cwd=root)

    node_a, node_b = node(0.0, requests[:2]), node(600.0, requests[2:])
    first_of_b = out / f"{requests[2].stem}.results.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (
        not first_of_b.exists() or len(first_of_b.read_bytes().splitlines()) < 5
    ):
        time.sleep(0.05)
    node_b.send_signal(signal.SIGKILL)
    assert node_b.wait() == -signal.SIGKILL
    assert node_a.wait(timeout=60) == 0
    assert len(list(out.iterdir())) == 3  # node B's second file never started

    assert cli_import(db, out) == 0  # the three files answered whole
    export_id = custom_ids(requests[0])[0].split(":")[1]
    capsys.readouterr()
    assert main(["batch", "close", "--store", str(db), export_id]) == 0
    assert "5 requests without a results line stored as missing" in capsys.readouterr().err
    again = cli_export(files, db, tmp_path / "b")
    assert sum(len(custom_ids(p)) for p in again) == 5
    assert cli_import(db, *_engine(fake_server, again, tmp_path / "r2")) == 0
    with Store(db) as store:
        assert {j.key: j.grade for j in stored_judgments(store, status="ok")} == expected
        assert store.count() == 20
    fake_server.reset()
    args = ["--store", str(db), "--base-url", fake_server.base_url, *MODEL, "--quiet"]
    assert main(files.args(*args)) == 0
    assert fake_server.counts["requests"] == 0
