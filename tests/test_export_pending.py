"""Exports asking the same keys: each export's lines get their own outcome from one import, and
a second export of requests still waiting in another is warned of (an engine run on both is paid
twice)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from grader.cli.main import main
from tests.fakeserver import FakeServer
from tests.grade_data import GradeFiles, write_grade_files
from tests.helpers.batch_cli import cli_export, custom_ids, http_engine, with_a_copied_doc


@pytest.fixture
def files(tmp_path: Path) -> GradeFiles:
    return with_a_copied_doc(write_grade_files(tmp_path, n_queries=4, depth=5))


def test_one_import_of_two_exports_sharing_keys_sets_each_exports_outcome(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path
) -> None:
    """Exports A and B ask the same keys; B's results first came back failed. Importing A's
    results and B's again in one go: A's answers are stored, and B's lines are ok too (the
    store's status is per key, a line's outcome per export)."""
    db = tmp_path / "ab.db"
    a = cli_export(files, db, tmp_path / "a")
    b = cli_export(files, db, tmp_path / "b", "--include-pending")  # the same keys again
    every = [cid for p in b for cid in custom_ids(p)]
    b_failed = http_engine(fake_server, b, tmp_path / "res-b", fail_ids=every)
    assert main(["batch", "import", "--store", str(db), *map(str, b_failed), "--quiet"]) == 1
    a_ok = http_engine(fake_server, a, tmp_path / "res-a")
    both = [*map(str, a_ok), *map(str, b_failed)]
    assert main(["batch", "import", "--store", str(db), *both, "--quiet"]) == 0
    with sqlite3.connect(db) as conn:
        outcomes = conn.execute(
            "SELECT export_id, outcome, COUNT(*) FROM export_lines GROUP BY 1, 2"
        ).fetchall()
    conn.close()
    assert sorted(o for _, o, _ in outcomes) == ["ok", "ok"]
    assert sum(n for *_, n in outcomes) == 40


def test_a_second_export_of_requests_waiting_in_another_is_warned(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "w.db"
    first = cli_export(files, db, tmp_path / "a")
    first_id = custom_ids(first[0])[0].split(":")[1]
    n = sum(len(p.read_text().splitlines()) for p in first)
    capsys.readouterr()
    cli_export(files, db, tmp_path / "b", "--include-pending")  # the same, none imported yet
    err = capsys.readouterr().err
    assert f"warning: {n:,} of these requests are also in export {first_id}" in err
    results = http_engine(fake_server, first, tmp_path / "res")
    assert main(["batch", "import", "--store", str(db), *map(str, results), "--quiet"]) == 0
    capsys.readouterr()
    third = cli_export(files, db, tmp_path / "c")  # all graded now: nothing to pay twice
    err = capsys.readouterr().err
    assert sum(len(p.read_text().splitlines()) for p in third) == 0
    assert "warning" not in err
