"""Store schema 9: export lines kept in file order. A store whose export was made before it
(export_lines keyed by key, schema 5's layout) upgrades in place, every line kept, and its
results still import."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from grader.store import migrations as schema8
from grader.store.migrations import EXPORT_STATEMENTS
from grader.store.store import Store
from tests.fakeserver import FakeServer
from tests.helpers.batch_import import engine_results, export_pairs, import_results

OLD_LINES = next(s for s in EXPORT_STATEMENTS if "CREATE TABLE export_lines" in s)
OLD_INDEX = next(s for s in EXPORT_STATEMENTS if "CREATE INDEX export_lines_file" in s)


def _to_schema_8(db: Path) -> list[tuple[str, str, int, str, str]]:
    """Put the store's export lines back in schema 5's table, and the later migrations' tables
    back as schema 8 had them (its judgments table is empty after an export): version 8; the
    export's rows."""
    conn = sqlite3.connect(db, isolation_level=None)
    assert conn.execute("SELECT COUNT(*) FROM judgments").fetchone() == (0,)
    conn.execute("DROP VIEW IF EXISTS judgment_rows")
    conn.execute("DROP TABLE judgments")
    conn.execute(schema8.JUDGMENTS_TABLE)
    for index in schema8.INDEXES:
        conn.execute(index)
    conn.execute("ALTER TABLE calls DROP COLUMN output_mode")
    rows = conn.execute(
        "SELECT export_id, key, file_no, query_id, doc_id FROM export_lines ORDER BY key"
    ).fetchall()
    conn.execute("DROP TABLE export_lines")
    conn.execute(OLD_LINES)
    conn.execute(OLD_INDEX)
    conn.executemany("INSERT INTO export_lines VALUES (?, ?, ?, ?, ?, NULL)", rows)
    conn.execute("DELETE FROM schema_migrations WHERE version > 8")
    conn.execute("PRAGMA user_version = 8")
    conn.close()
    return rows


def test_lines_are_numbered_in_file_order(tmp_path: Path) -> None:
    db, requests = export_pairs(tmp_path, 120)
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT file_no, line_no, key FROM export_lines ORDER BY file_no, line_no"
        ).fetchall()
    written = [json.loads(x)["custom_id"].split(":", 2)[2] for x in requests[0].open()]
    assert [(1, n, k) for n, k in enumerate(written, start=1)] == rows


@pytest.mark.slow
def test_a_store_exported_before_schema_9_upgrades_and_imports(tmp_path: Path) -> None:
    db, requests = export_pairs(tmp_path, 200)
    results = engine_results(FakeServer(), requests, tmp_path / "res", bad={"4"})
    old = _to_schema_8(db)
    with Store(db) as store:
        assert store.schema_version >= 9
    with sqlite3.connect(db) as conn:
        moved = conn.execute(
            "SELECT export_id, key, file_no, query_id, doc_id FROM export_lines ORDER BY key"
        ).fetchall()
        numbers = conn.execute(
            "SELECT line_no FROM export_lines WHERE file_no = 1 ORDER BY key"
        ).fetchall()
    assert moved == old  # every line kept
    assert [n for (n,) in numbers] == list(range(1, 201))  # numbered in key order
    summary = import_results(db, results, 0)
    assert (summary.ok, summary.failed, summary.missing) == (199, 1, 0)
    with sqlite3.connect(db) as conn:
        outcomes = conn.execute("SELECT outcome, COUNT(*) FROM export_lines GROUP BY 1").fetchall()
    assert outcomes == [("failed", 1), ("ok", 199)]
