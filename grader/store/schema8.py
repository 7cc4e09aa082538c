"""Migration 8, frozen: judgments in parts (`head`, `tail`, `extra`, which migration 11 folds into
one payload) with their judge and prompt once in `judgment_sources`, keys as raw bytes."""

from __future__ import annotations

import sqlite3
from typing import Any

from grader.models import Judgment
from grader.store.judgment_rows import Source, encode_key, source_id, sources_for_columns, time_text


def pairs_table(name: str, key_type: str = "TEXT") -> str:
    """The id pairs of each content key (schema 3, 7's copy of it, and 8's with keys as bytes)."""
    return f"""CREATE TABLE {name} (
        key {key_type} NOT NULL,
        query_id TEXT NOT NULL,
        doc_id TEXT NOT NULL,
        PRIMARY KEY (key, query_id, doc_id)
    )"""


def judgments_table(name: str, parts: str) -> str:
    """The judgments table of schema 8 (`parts`: head, tail, extra) or 11 (payload)."""
    return f"""CREATE TABLE {name} (
    key BLOB NOT NULL,
    query_id TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    source_id INTEGER NOT NULL REFERENCES judgment_sources (id),
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    grade INTEGER CHECK (grade IS NULL OR grade BETWEEN 0 AND 3),
    created_at TEXT NOT NULL,
    {parts},
    CHECK ((status = 'ok') = (grade IS NOT NULL))
)"""


JUDGMENTS_TABLE = judgments_table("judgments", "head TEXT NOT NULL, tail TEXT NOT NULL, extra TEXT")

SOURCES_TABLE = """CREATE TABLE judgment_sources (
    id INTEGER PRIMARY KEY,
    signature TEXT NOT NULL UNIQUE,
    judge TEXT NOT NULL,
    model TEXT,
    prompt_name TEXT,
    prompt_version TEXT,
    prompt_sha TEXT,
    fingerprint TEXT,
    judge_json TEXT NOT NULL,
    prompt_json TEXT NOT NULL
)"""

INDEXES = (
    "CREATE UNIQUE INDEX judgments_key ON judgments (key)",
    "CREATE INDEX judgments_source ON judgments (source_id, status)",
)

DEFAULT_EXTRA = '"judges":null,"disagreement":null,"verification":null'
"""`extra` when NULL (migration 11 folds it into the payload)."""

_NAMES = list(Judgment.model_fields)
_PARTS = [
    set(_NAMES[_NAMES.index(first) + 1 : _NAMES.index(end) if end else None])
    for first, end in (("status", "judge"), ("key", "created_at"), ("created_at", None))
]
"""The fields of `head`, `tail` and `extra`: the runs of fields pydantic writes between the
columns (ids, grade, status), the source (judge, prompt), the key and `created_at`."""


def _row_of(row: tuple[Any, ...]) -> tuple[tuple[Any, ...], Source]:
    """A schema 7 row (columns, fingerprint, JSON) as schema 8 keeps it, and its source."""
    key, qid, did, judge, model, name, version, sha, status, grade = row[:10]
    source = sources_for_columns(judge, model, name, version, sha, row[11])
    judgment = Judgment.model_validate_json(row[12])
    written = (judgment.key, judgment.query_id, judgment.doc_id, judgment.status, judgment.grade)
    if written != (key, qid, did, status, grade):
        raise ValueError(f"the judgment of {qid} {did} does not fit its columns")
    head, tail, extra = (judgment.model_dump_json(include=part)[1:-1] for part in _PARTS)
    columns = (encode_key(key), qid, did, status, grade, time_text(judgment.created_at))
    return (*columns, head, tail, None if extra == DEFAULT_EXTRA else extra), source


_BATCH = 5000


def upgrade_to_parts(conn: sqlite3.Connection) -> None:
    """Migration 8 (module docstring), in the migration's transaction."""
    conn.execute("ALTER TABLE judgments RENAME TO judgments_v7")
    conn.execute(SOURCES_TABLE)
    conn.execute(JUDGMENTS_TABLE)
    cache: dict[str, int] = {}
    cursor = conn.execute(
        "SELECT j.key, j.query_id, j.doc_id, j.judge, j.model, j.prompt_name, j.prompt_version,"
        " j.prompt_sha, j.status, j.grade, j.created_at, f.fingerprint, j.judgment"
        " FROM judgments_v7 j LEFT JOIN judge_fingerprints f ON f.id = j.fingerprint_id"
        " ORDER BY j.rowid"
    )
    while batch := cursor.fetchmany(_BATCH):
        rows = []
        for row in batch:
            try:
                columns, source = _row_of(row)
            except ValueError as exc:
                message = f"the judgment of key {row[0]} is unreadable: {exc}"
                raise sqlite3.DatabaseError(message) from None
            rows.append((*columns[:3], source_id(conn, source, cache), *columns[3:]))
        conn.executemany(
            "INSERT INTO judgments (key, query_id, doc_id, source_id, status, grade,"
            " created_at, head, tail, extra) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    conn.execute("DROP TABLE judgments_v7")
    conn.execute("DROP TABLE judge_fingerprints")
    for statement in INDEXES:
        conn.execute(statement)
    # The id pairs, their keys as bytes. (Migration 11 drops the view of schema 8.)
    conn.create_function("relgrade_encode_key", 1, encode_key, deterministic=True)
    conn.execute(pairs_table("judgment_pairs_v8", "BLOB") + " WITHOUT ROWID")
    conn.execute(
        "INSERT OR IGNORE INTO judgment_pairs_v8 SELECT relgrade_encode_key(key), query_id,"
        " doc_id FROM judgment_pairs"
    )
    conn.execute("DROP TABLE judgment_pairs")
    conn.execute("ALTER TABLE judgment_pairs_v8 RENAME TO judgment_pairs")
