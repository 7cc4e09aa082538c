"""Stores as older relgrade versions wrote them, for migration tests: the schema of any version
up to 9 (schema 8 and 9 kept judgments in parts, before one payload) filled with the judgments,
id pairs and texts of a store this version wrote."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grader.store.judgment_rows import key_sql
from grader.store.migrations import MIGRATIONS

Row = tuple[Any, ...]

# A judgment as schemas 1 to 7 kept it: columns, fingerprint JSON, whole JSON.
LOGICAL_COLUMNS = (
    "key, query_id, doc_id, judge, model, prompt_name, prompt_version, prompt_sha, status,"
    " grade, created_at, fingerprint, judgment"
)


def logical_rows(db: Path) -> list[Row]:
    """Every judgment of a store this version wrote, as schemas up to 7 kept it."""
    with sqlite3.connect(db) as conn:
        rows = conn.execute(f"SELECT {LOGICAL_COLUMNS} FROM judgment_rows ORDER BY key").fetchall()
    conn.close()
    return rows


def _table(db: Path, sql: str) -> list[Row]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(sql).fetchall()
    conn.close()
    return rows


def schema_store(path: Path, version: int, *, since: int = 0) -> sqlite3.Connection:
    """An empty store of schema `version` (migrations 1 to `version` only); with `since`, the
    store at `path` of schema `since` taken to `version` as relgrade did."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    for migration in MIGRATIONS:
        if migration.version > version:
            break
        if migration.version <= since:
            continue
        migration.run(conn, "2026-01-01T00:00:00+00:00")
    conn.execute("COMMIT")
    return conn


def write_old_store(
    old: Path,
    version: int,
    new: Path,
    *,
    edit: Callable[[Row], Row] = lambda row: row,
) -> None:
    """Write the judgments (each through `edit`), id pairs (schema 3 on) and texts of the store
    `new` into a store `old` of schema `version` (2 to 9: 8 and 9 as a store of schema 7 was
    upgraded to them)."""
    assert 2 <= version <= 9
    if version > 7:
        write_old_store(old, 7, new, edit=edit)
        schema_store(old, version, since=7).close()
        return
    rows = [edit(row) for row in logical_rows(new)]
    pairs = _table(new, f"SELECT {key_sql('key')}, query_id, doc_id FROM judgment_pairs")
    queries = _table(new, "SELECT * FROM queries")
    docs = _table(new, "SELECT * FROM docs")
    conn = schema_store(old, version)
    conn.execute("BEGIN")
    if version == 7:
        for row in rows:
            fp_id = None
            if row[11] is not None:
                conn.execute(
                    "INSERT OR IGNORE INTO judge_fingerprints (fingerprint) VALUES (?)", (row[11],)
                )
                (fp_id,) = conn.execute(
                    "SELECT id FROM judge_fingerprints WHERE fingerprint = ?", (row[11],)
                ).fetchone()
            columns = LOGICAL_COLUMNS.replace("fingerprint", "fingerprint_id")
            conn.execute(
                f"INSERT INTO judgments ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (*row[:11], fp_id, row[12]),
            )
    else:
        conn.executemany(
            f"INSERT INTO judgments ({LOGICAL_COLUMNS})"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    if version >= 3:
        conn.executemany("INSERT INTO judgment_pairs VALUES (?, ?, ?)", pairs)
    conn.executemany("INSERT INTO queries VALUES (?, ?)", queries)
    conn.executemany("INSERT INTO docs VALUES (?, ?, ?, ?)", docs)
    conn.execute("COMMIT")
    conn.close()
