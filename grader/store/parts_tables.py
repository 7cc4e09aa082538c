"""Schema 8: judgments kept in parts, keys as raw bytes (`grader.store.judgment_rows`).

Before it a judgments row held the whole JSON of its judgment beside columns that repeated a
third of it (ids, grade, status, judge, prompt, key, time), and every key three times as 71
characters of text (the row, its index, the id pairs). Now a row keeps what only it says, the
judge and prompt live once in `judgment_sources`, and keys are 32 bytes. The view
`judgment_rows` shows every judgment as before (key text, judge, prompt, JSON), for readers and
for anyone with the sqlite3 shell.

The upgrade writes every stored judgment in parts; a row whose JSON an older version wrote
otherwise (a tagged prompt sha) goes through the model first and comes out as this version writes
it, as reading it always did.
"""

from __future__ import annotations

import sqlite3

from grader.errors import StoreError
from grader.store.judgment_rows import Source, encode_key, json_sql, key_sql, stored_row

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

JUDGMENTS_TABLE = """CREATE TABLE judgments (
    key BLOB NOT NULL,
    query_id TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    source_id INTEGER NOT NULL REFERENCES judgment_sources (id),
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    grade INTEGER CHECK (grade IS NULL OR grade BETWEEN 0 AND 3),
    created_at TEXT NOT NULL,
    head TEXT NOT NULL,
    tail TEXT NOT NULL,
    extra TEXT,
    CHECK ((status = 'ok') = (grade IS NOT NULL))
)"""

INDEXES = (
    "CREATE UNIQUE INDEX judgments_key ON judgments (key)",
    "CREATE INDEX judgments_source ON judgments (source_id, status)",
)

ROWS_VIEW = f"""CREATE VIEW judgment_rows AS
SELECT {key_sql("j.key")} AS key, j.query_id, j.doc_id, s.judge, s.model, s.prompt_name,
       s.prompt_version, s.prompt_sha, j.status, j.grade, j.created_at, s.fingerprint,
       {json_sql("j", "s")} AS judgment, j.key AS stored_key, j.source_id
FROM judgments j JOIN judgment_sources s ON s.id = j.source_id"""

INSERT_SOURCE = """
INSERT INTO judgment_sources (signature, judge, model, prompt_name, prompt_version, prompt_sha,
                              fingerprint, judge_json, prompt_json)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (signature) DO UPDATE SET signature = excluded.signature RETURNING id
"""


def source_id(conn: sqlite3.Connection, source: Source, cache: dict[str, int]) -> int:
    """The id of `source` in `judgment_sources` (added when new); `cache` by signature."""
    signature = source.signature
    found = cache.get(signature)
    if found is None:
        found = cache[signature] = conn.execute(
            INSERT_SOURCE,
            (
                signature,
                source.judge,
                source.model,
                source.prompt_name,
                source.prompt_version,
                source.prompt_sha,
                source.fingerprint,
                source.judge_json,
                source.prompt_json,
            ),
        ).fetchone()[0]
    return found


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
    while True:
        batch = cursor.fetchmany(_BATCH)
        if not batch:
            break
        rows = []
        for row in batch:
            try:
                stored = stored_row(row)
            except (ValueError, StoreError) as exc:
                message = f"the judgment of key {row[0]} is unreadable: {exc}"
                raise sqlite3.DatabaseError(message) from None
            sid = source_id(conn, stored.source, cache)
            rows.append((*stored.columns[:3], sid, *stored.columns[3:]))
        conn.executemany(
            "INSERT INTO judgments (key, query_id, doc_id, source_id, status, grade,"
            " created_at, head, tail, extra) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    conn.execute("DROP TABLE judgments_v7")
    conn.execute("DROP TABLE judge_fingerprints")
    for statement in INDEXES:
        conn.execute(statement)
    conn.execute(ROWS_VIEW)
    # The id pairs, their keys as bytes.
    conn.create_function("relgrade_encode_key", 1, encode_key, deterministic=True)
    conn.execute(
        """CREATE TABLE judgment_pairs_v8 (
            key BLOB NOT NULL,
            query_id TEXT NOT NULL,
            doc_id TEXT NOT NULL,
            PRIMARY KEY (key, query_id, doc_id)
        ) WITHOUT ROWID"""
    )
    conn.execute(
        "INSERT OR IGNORE INTO judgment_pairs_v8 SELECT relgrade_encode_key(key), query_id,"
        " doc_id FROM judgment_pairs"
    )
    conn.execute("DROP TABLE judgment_pairs")
    conn.execute("ALTER TABLE judgment_pairs_v8 RENAME TO judgment_pairs")
