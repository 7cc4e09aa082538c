"""The store tables that keep Batch API jobs (owner: `grader.batch`).

A job's `phase` (prepared, uploaded, submitted, collected) lets another process continue it; an
item's `outcome` is `batch`, `live` or `failed`; `base_url` is the endpoint it was sent to, never
the key.
"""

from __future__ import annotations

import sqlite3

BATCH_STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE batch_jobs (
        job_id INTEGER PRIMARY KEY AUTOINCREMENT,
        phase TEXT NOT NULL CHECK (phase IN ('prepared', 'uploaded', 'submitted', 'collected')),
        batch_id TEXT UNIQUE,
        input_file_id TEXT,
        output_file_id TEXT,
        error_file_id TEXT,
        remote_status TEXT,
        judge_config TEXT NOT NULL,
        n_requests INTEGER NOT NULL,
        n_completed INTEGER NOT NULL DEFAULT 0,
        n_failed INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    )""",
    """CREATE TABLE batch_items (
        job_id INTEGER NOT NULL REFERENCES batch_jobs (job_id),
        key TEXT NOT NULL,
        query_id TEXT NOT NULL,
        doc_id TEXT NOT NULL,
        outcome TEXT CHECK (outcome IS NULL OR outcome IN ('batch', 'live', 'failed')),
        PRIMARY KEY (job_id, key, query_id, doc_id)
    )""",
    "CREATE INDEX batch_items_key ON batch_items (key)",
    "CREATE INDEX batch_jobs_phase ON batch_jobs (phase)",
)


def add_base_url_column(conn: sqlite3.Connection) -> None:
    """Add `batch_jobs.base_url` (the endpoint of each job, without credentials or query; never
    the key), unless a store migrated by hand already has it."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(batch_jobs)")}
    if "base_url" not in columns:
        conn.execute("ALTER TABLE batch_jobs ADD COLUMN base_url TEXT")
