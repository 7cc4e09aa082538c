"""The store's layout: schema 7 keeps a judge's fingerprint once and the id pairs without a
second copy of each key; schema 8 keeps judgments in parts with their judge and prompt once and
keys as bytes. Stores of schema 6 to 9 upgrade in place and read back every judgment as it was."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.errors import StoreError
from grader.store.migrations import MIGRATIONS
from grader.store.store import Store
from tests.grade_data import write_grade_files
from tests.helpers.judgments import stored_judgments
from tests.helpers.old_stores import schema_store, write_old_store


def test_a_judges_fingerprint_is_stored_once(tmp_path: Path) -> None:
    files = write_grade_files(tmp_path, n_queries=3, depth=4)
    db = tmp_path / "s.db"
    assert main(files.args("--judge", "lexical", "--store", db, "--quiet")) == 0
    with Store(db) as store:
        assert store.count(status="ok") == 12
        keys = [j.key for j in stored_judgments(store)]
        fingerprints = [store.fingerprint(k) for k in keys]
    assert all(fp is not None and fp["judge"] == "lexical" for fp in fingerprints)
    assert all(fp == fingerprints[0] for fp in fingerprints)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT COUNT(*) FROM judgment_sources").fetchone()[0] == 1
        columns = [r[1] for r in conn.execute("PRAGMA table_info(judgments)")]
        # Each judgment is plain JSON text a SELECT of the view can stream.
        texts = [t for (t,) in conn.execute("SELECT judgment FROM judgment_rows")]
    conn.close()
    assert "fingerprint" not in columns and "source_id" in columns
    assert {json.loads(t)["key"] for t in texts} == set(keys)


@pytest.mark.slow
@pytest.mark.parametrize("version", [6, 7, 8, 9])
def test_an_older_store_migrates_and_reads_back_every_judgment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], version: int
) -> None:
    files = write_grade_files(tmp_path, n_queries=3, depth=4)
    new, old = tmp_path / "new.db", tmp_path / "old.db"
    assert main(files.args("--judge", "lexical", "--store", new, "--quiet")) == 0
    with Store(new) as store:
        expected = {j.key: j for j in stored_judgments(store)}
        expected_pairs = [(q, d, j.key) for q, d, j in store.iter_pair_judgments()]
        expected_fp = {k: store.fingerprint(k) for k in expected}
        expected_docs = store.docs()
        expected_queries = store.queries()
    write_old_store(old, version, new)
    with sqlite3.connect(old) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == version
        assert conn.execute("SELECT COUNT(*) FROM judgments").fetchone()[0] == 12
    conn.close()
    with Store(old) as store:
        assert store.schema_version == MIGRATIONS[-1].version >= 8
        got = {j.key: j for j in stored_judgments(store)}
        assert got == expected
        assert store.get_many(expected) == expected
        assert [(q, d, j.key) for q, d, j in store.iter_pair_judgments()] == expected_pairs
        assert {k: store.fingerprint(k) for k in expected} == expected_fp
        assert store.docs() == expected_docs and store.queries() == expected_queries
    with sqlite3.connect(old) as conn:
        assert conn.execute("SELECT COUNT(*) FROM judgment_sources").fetchone()[0] == 1
        # every key is kept as its 32 bytes, in the rows and the id pairs
        for table in ("judgments", "judgment_pairs"):
            kinds = conn.execute(f"SELECT DISTINCT typeof(key), length(key) FROM {table}")
            assert kinds.fetchall() == [("blob", 32)]
    conn.close()
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
    schema_store(tmp_path / "old.db", 6).close()
    with Store(tmp_path / "old.db") as store:
        assert store.schema_version >= 8
    with sqlite3.connect(tmp_path / "old.db") as conn:
        assert conn.execute("PRAGMA page_size").fetchone()[0] == 4096


def test_a_schema_7_judgment_whose_json_names_another_judge_stops_the_migration(
    tmp_path: Path,
) -> None:
    """Migration 8 keeps one source per row, from its columns: a judgment whose JSON names
    another judge or prompt is refused (the migration rolls back), never silently rewritten."""
    from tests.helpers.old_stores import Row

    files = write_grade_files(tmp_path, n_queries=1, depth=2)
    new, old = tmp_path / "new.db", tmp_path / "old.db"
    assert main(files.args("--judge", "lexical", "--store", new, "--quiet")) == 0

    def other_judge(row: Row) -> Row:
        return (*row[:3], "someone-else", *row[4:])

    write_old_store(old, 7, new, edit=other_judge)
    with pytest.raises(StoreError, match="does not fit its columns"):
        Store(old)
    with sqlite3.connect(old) as conn:  # rolled back: still schema 7, every row kept
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 7
        assert conn.execute("SELECT COUNT(*) FROM judgments").fetchone()[0] == 2
    conn.close()
