"""The store's schema, as a numbered list of migrations applied in order.

Each migration runs in its own transaction and bumps `PRAGMA user_version` to its number, so a
store is always at exactly one known version. To change the schema, APPEND a `Migration` with the
next number (never edit a released one): stores written by older relgrade versions then upgrade
on open, and a store from a newer relgrade is refused instead of misread.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from grader.store.batch_tables import BATCH_STATEMENTS, add_base_url_column
from grader.store.claims import CLAIMS_TABLE
from grader.store.export_tables import EXPORT_LINES_IN_FILE_ORDER, EXPORT_STATEMENTS
from grader.store.payload_tables import FOLD_STATEMENTS
from grader.store.schema7 import SCHEMA7_STATEMENTS
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
            # One row per judgment, keyed by the content key (grader.keys.content_key). The full
            # Judgment is kept as JSON; the other columns are there to select and count quickly.
            """CREATE TABLE judgments (
                key TEXT PRIMARY KEY,
                query_id TEXT NOT NULL,
                doc_id TEXT NOT NULL,
                judge TEXT NOT NULL,
                model TEXT,
                prompt_name TEXT,
                prompt_version TEXT,
                prompt_sha TEXT,
                status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
                grade INTEGER CHECK (grade IS NULL OR grade BETWEEN 0 AND 3),
                created_at TEXT NOT NULL,
                fingerprint TEXT,
                judgment TEXT NOT NULL,
                CHECK ((status = 'ok') = (grade IS NOT NULL))
            )""",
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
    # Batch API jobs and which keys each holds (owner: grader.batch), so a later process can
    # check on and collect batches that an earlier one submitted.
    Migration(2, "batch jobs", BATCH_STATEMENTS),
    # Every (query_id, doc_id) pair of each content key. Pairs whose texts repeat under other
    # ids share one key (graded once), and a judgments row names only one of them; this table
    # names them all, so regrade and its outputs cover every id pair. An older store knows only
    # the pair each row names: rerunning its `grade` command records the others (no request).
    Migration(
        3,
        "id pairs of each content key",
        (
            """CREATE TABLE judgment_pairs (
                key TEXT NOT NULL,
                query_id TEXT NOT NULL,
                doc_id TEXT NOT NULL,
                PRIMARY KEY (key, query_id, doc_id)
            )""",
            "CREATE INDEX judgment_pairs_pair ON judgment_pairs (query_id, doc_id)",
            "INSERT OR IGNORE INTO judgment_pairs (key, query_id, doc_id)"
            " SELECT key, query_id, doc_id FROM judgments",
        ),
    ),
    # Leases on content keys in flight (owner: grader.store.claims), so several processes on
    # one store send each request once; a lease dies with its process or at its expiry.
    Migration(4, "claims on keys in flight", (CLAIMS_TABLE,)),
    # Batch file exports for any inference engine (owner: grader.batch.files.exports): the request
    # files, their lines and how each came back, so any process can import the results.
    Migration(5, "batch file exports", EXPORT_STATEMENTS),
    # The endpoint each Batch API job was sent to (owner: grader.batch), never the key, so a
    # later `batch status|collect` reaches that server without being told it again.
    Migration(6, "batch job endpoint", apply=add_base_url_column),
    # A leaner store: a judge's fingerprint (~850 bytes for the lexical judge) is
    # kept once in `judge_fingerprints` instead of on every judgments row, and the id pairs of
    # each key are a WITHOUT ROWID table (no second copy of every key in an index). Old stores
    # upgrade in place; every judgment's JSON is copied as it was.
    Migration(7, "judge fingerprints kept once", SCHEMA7_STATEMENTS, vacuum=True),
    # Judgments in parts (grader.store.schema8): a row keeps what only it says, judge and
    # prompt live once in `judgment_sources`, keys are 32 raw bytes; the view `judgment_rows`
    # shows each judgment's whole JSON as before.
    Migration(8, "judgments in parts", apply=upgrade_to_parts, vacuum=True),
    # Export lines kept in file order (owner: grader.batch.files.exports), so an import sets
    # outcomes on neighbouring rows instead of one random page per line.
    Migration(9, "export lines in file order", EXPORT_LINES_IN_FILE_ORDER),
    # Each HTTP attempt's output mode (issue 24): which mode a reply came in, and the modes a
    # server refused (rows `mode_rejected`), are in the call log.
    Migration(10, "call output mode", ("ALTER TABLE calls ADD COLUMN output_mode TEXT",)),
    # Judgments as columns and one payload (owner: grader.store.judgment_rows), written by one
    # encoder: schema 8's parts folded together (grader.store.payload_tables). The view
    # `judgment_rows` is made when a store opens, from then on.
    Migration(11, "judgments as columns and one payload", FOLD_STATEMENTS, vacuum=True),
]


def latest_version() -> int:
    """The schema version this relgrade writes."""
    return MIGRATIONS[-1].version if MIGRATIONS else 0
