"""The store's schema, as a numbered list of migrations applied in order.

Each runs in its own transaction and sets `PRAGMA user_version`. To change the schema, APPEND a
`Migration` (never edit a released one): older stores upgrade on open, newer ones are refused.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from grader.store.batch_tables import BATCH_STATEMENTS, add_base_url_column
from grader.store.claims import CLAIMS_TABLE
from grader.store.export_tables import EXPORT_LINES_IN_FILE_ORDER, EXPORT_STATEMENTS
from grader.store.payload_tables import FOLD_STATEMENTS
from grader.store.schema7 import SCHEMA7_STATEMENTS, judgments_table, pairs_table
from grader.store.schema8 import upgrade_to_parts


@dataclass(frozen=True)
class Migration:
    """One schema step: SQL statements run in order, or a function given the connection."""

    version: int
    name: str
    statements: tuple[str, ...] = ()
    apply: Callable[[sqlite3.Connection], None] | None = None
    vacuum: bool = False  # rewrite the file after it, giving back the space it freed


MIGRATIONS: list[Migration] = [
    Migration(
        1,
        "judgments, texts and call log",
        (
            # One row per judgment, keyed by the content key, with its whole JSON.
            judgments_table("judgments", "fingerprint TEXT"),
            "CREATE INDEX judgments_pair ON judgments (query_id, doc_id)",
            "CREATE INDEX judgments_judge ON judgments (judge, prompt_name, status)",
            # The texts, so `regrade --store DB` needs no other file.
            """CREATE TABLE queries (
                query_id TEXT PRIMARY KEY,
                text TEXT NOT NULL
            )""",
            """CREATE TABLE docs (
                doc_id TEXT PRIMARY KEY,
                text TEXT NOT NULL,
                title TEXT,
                metadata TEXT NOT NULL DEFAULT '{}'
            )""",
            # One row per HTTP attempt. Never holds credentials.
            """CREATE TABLE calls (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                key TEXT,
                attempt INTEGER,
                status TEXT,
                http_status INTEGER,
                latency_ms REAL,
                prompt_tokens INTEGER,
                completion_tokens INTEGER,
                cached_tokens INTEGER,
                error_type TEXT,
                error_message TEXT,
                created_at TEXT NOT NULL
            )""",
            "CREATE INDEX calls_key ON calls (key)",
            """CREATE TABLE schema_migrations (
                version INTEGER PRIMARY KEY,
                name TEXT NOT NULL,
                applied_at TEXT NOT NULL
            )""",
        ),
    ),
    # Batch API jobs and which keys each holds (owner: grader.batch).
    Migration(2, "batch jobs", BATCH_STATEMENTS),
    # Every (query_id, doc_id) pair of each content key (pairs with equal texts share a key).
    Migration(
        3,
        "id pairs of each content key",
        (
            pairs_table("judgment_pairs"),
            "CREATE INDEX judgment_pairs_pair ON judgment_pairs (query_id, doc_id)",
            "INSERT OR IGNORE INTO judgment_pairs (key, query_id, doc_id)"
            " SELECT key, query_id, doc_id FROM judgments",
        ),
    ),
    # Leases on content keys in flight (owner: grader.store.claims).
    Migration(4, "claims on keys in flight", (CLAIMS_TABLE,)),
    # Batch file exports for any inference engine (owner: grader.batch.files.exports).
    Migration(5, "batch file exports", EXPORT_STATEMENTS),
    # The endpoint each Batch API job was sent to (owner: grader.batch), never the key.
    Migration(6, "batch job endpoint", apply=add_base_url_column),
    # A leaner store (grader.store.schema7); every judgment's JSON is copied as it was.
    Migration(7, "judge fingerprints kept once", SCHEMA7_STATEMENTS, vacuum=True),
    # Judgments in parts, judge and prompt once in `judgment_sources` (grader.store.schema8).
    Migration(8, "judgments in parts", apply=upgrade_to_parts, vacuum=True),
    # Export lines kept in file order (owner: grader.batch.files.exports).
    Migration(9, "export lines in file order", EXPORT_LINES_IN_FILE_ORDER),
    # Each HTTP attempt's output mode, refusals included (rows `mode_rejected`).
    Migration(10, "call output mode", ("ALTER TABLE calls ADD COLUMN output_mode TEXT",)),
    # Judgments as columns and one payload (grader.store.payload_tables).
    Migration(11, "judgments as columns and one payload", FOLD_STATEMENTS, vacuum=True),
]


def latest_version() -> int:
    """The schema version this relgrade writes."""
    return MIGRATIONS[-1].version if MIGRATIONS else 0
