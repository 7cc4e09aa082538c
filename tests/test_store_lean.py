"""Store schema 7 (issue 12): a judge's fingerprint kept once, the id pairs without a second
copy of each key; a store of schema 6 upgrades in place and reads back every judgment as it was."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.store.migrations import MIGRATIONS
from grader.store.store import Store
from tests.grade_data import write_grade_files

_OLD_UPSERT = (
    "INSERT INTO judgments (key, query_id, doc_id, judge, model, prompt_name, prompt_version,"
    " prompt_sha, status, grade, created_at, fingerprint, judgment)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _schema_6_store(path: Path) -> sqlite3.Connection:
    """An empty store as relgrade wrote it before schema 7: migrations 1 to 6 only."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    for migration in MIGRATIONS:
        if migration.version > 6:
            break
        for statement in migration.statements:
            conn.execute(statement)
        if migration.apply is not None:
            migration.apply(conn)
        conn.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
            (migration.version, migration.name, "2026-01-01T00:00:00+00:00"),
        )
    conn.execute("PRAGMA user_version = 6")
    conn.execute("COMMIT")
    return conn


def _copy_as_schema_6(new: Path, old: Path) -> None:
    """Write the judgments, id pairs and texts of the store `new` into a schema-6 store `old`,
    each row with its fingerprint in its own column, as schema 6 kept it."""
    src = sqlite3.connect(new)
    dst = _schema_6_store(old)
    dst.execute("BEGIN")
    rows = src.execute(
        "SELECT j.key, j.query_id, j.doc_id, j.judge, j.model, j.prompt_name, j.prompt_version,"
        " j.prompt_sha, j.status, j.grade, j.created_at, f.fingerprint, j.judgment"
        " FROM judgments j LEFT JOIN judge_fingerprints f ON f.id = j.fingerprint_id"
    ).fetchall()
    dst.executemany(_OLD_UPSERT, rows)
    for table in ("judgment_pairs", "queries", "docs"):
        data = src.execute(f"SELECT * FROM {table}").fetchall()
        marks = ",".join("?" * len(data[0]))
        dst.executemany(f"INSERT INTO {table} VALUES ({marks})", data)
    dst.execute("COMMIT")
    src.close()
    dst.close()


def test_a_judges_fingerprint_is_stored_once(tmp_path: Path) -> None:
    files = write_grade_files(tmp_path, n_queries=3, depth=4)
    db = tmp_path / "s.db"
    assert main(files.args("--judge", "lexical", "--store", db, "--quiet")) == 0
    with Store(db) as store:
        assert store.count(status="ok") == 12
        keys = [j.key for j in store.iter_judgments()]
        fingerprints = [store.fingerprint(k) for k in keys]
    assert all(fp is not None and fp["judge"] == "lexical" for fp in fingerprints)
    assert all(fp == fingerprints[0] for fp in fingerprints)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM judge_fingerprints").fetchone()[0] == 1
        columns = [r[1] for r in conn.execute("PRAGMA table_info(judgments)")]
        # The JSON stays plain JSON text a SELECT can stream.
        texts = [t for (t,) in conn.execute("SELECT judgment FROM judgments")]
    assert "fingerprint" not in columns and "fingerprint_id" in columns
    assert {json.loads(t)["key"] for t in texts} == set(keys)


def test_a_schema_6_store_migrates_and_reads_back_every_judgment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_grade_files(tmp_path, n_queries=3, depth=4)
    new, old = tmp_path / "new.db", tmp_path / "old.db"
    assert main(files.args("--judge", "lexical", "--store", new, "--quiet")) == 0
    with Store(new) as store:
        expected = {j.key: j for j in store.iter_judgments()}
        expected_pairs = [(q, d, j.key) for q, d, j in store.iter_pair_judgments()]
        expected_fp = {k: store.fingerprint(k) for k in expected}
        expected_docs = store.docs()
        expected_queries = store.queries()
    _copy_as_schema_6(new, old)
    with sqlite3.connect(old) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 6
        assert (
            conn.execute("SELECT COUNT(*) FROM judgments WHERE fingerprint IS NULL").fetchone()[0]
            == 0
        )
    with Store(old) as store:
        assert store.schema_version == MIGRATIONS[-1].version >= 7
        got = {j.key: j for j in store.iter_judgments()}
        assert got == expected
        assert store.get_many(expected) == expected
        assert [(q, d, j.key) for q, d, j in store.iter_pair_judgments()] == expected_pairs
        assert {k: store.fingerprint(k) for k in expected} == expected_fp
        assert store.docs() == expected_docs and store.queries() == expected_queries
    with sqlite3.connect(old) as conn:
        assert conn.execute("SELECT COUNT(*) FROM judge_fingerprints").fetchone()[0] == 1
    capsys.readouterr()
    out = tmp_path / "j.jsonl"
    args = files.args("--judge", "lexical", "--store", old, "--out", out)
    assert main(args) == 0
    assert "graded 0," in capsys.readouterr().err
    assert len(out.read_text().splitlines()) == 12


def test_a_new_store_has_8k_pages_and_an_old_one_keeps_its_own(tmp_path: Path) -> None:
    with Store(tmp_path / "new.db") as store:
        store.put_pairs([("k", "q1", "d1")])
    with sqlite3.connect(tmp_path / "new.db") as conn:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == 8192
    _schema_6_store(tmp_path / "old.db").close()
    with Store(tmp_path / "old.db") as store:
        assert store.schema_version >= 7
    with sqlite3.connect(tmp_path / "old.db") as conn:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == 4096
