"""The store tables that keep Batch API jobs, appended to the store's numbered migrations.

A job is one input file / one batch. Its `phase` records how far relgrade got, so a process that
stops anywhere can be continued by another (`relgrade batch collect` or rerunning regrade):

- prepared: the items (content key, query id, doc id) are recorded; nothing is uploaded yet
- uploaded: the input file is on the server (`input_file_id`), the batch not yet created
- submitted: the batch exists (`batch_id`); `remote_status` is its last known status
- collected: every item has a judgment (ok or failed) in the store

An item's `outcome` says how it ended: graded from the batch output (`batch`, at the discounted
price), re-asked live (`live`), or `failed`.

A job also records the endpoint it was sent to (`base_url`, added later: NULL on older jobs),
never the key, so `relgrade batch status|collect` reach the same server without --base-url.
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
