"""The store's schema as numbered migrations, each in its own transaction. To change the schema,
APPEND a `Migration` (never edit a released one): old stores upgrade on open, newer are refused."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from grader.models import Judgment
from grader.store.claims import CLAIMS_TABLE
from grader.store.judgment_rows import encode_key, source_id, sources_for_columns, time_text


def judgments_table(name: str, fingerprint: str) -> str:
    """The judgments table of schema 1 (`fingerprint TEXT`) and 7 (a fingerprint id)."""
    return f"""CREATE TABLE {name} (
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
        {fingerprint},
        judgment TEXT NOT NULL,
        CHECK ((status = 'ok') = (grade IS NOT NULL))
    )"""


def pairs_table(name: str, key_type: str = "TEXT") -> str:
    """The id pairs of each content key (schema 3, 7's copy of it, and 8's with keys as bytes)."""
    return f"""CREATE TABLE {name} (
        key {key_type} NOT NULL,
        query_id TEXT NOT NULL,
        doc_id TEXT NOT NULL,
        PRIMARY KEY (key, query_id, doc_id)
    )"""


def judgments_table8(name: str, parts: str) -> str:
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


JUDGMENTS_TABLE = judgments_table8(
    "judgments", "head TEXT NOT NULL, tail TEXT NOT NULL, extra TEXT"
)

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


_BATCH = 5000


def upgrade_to_parts(conn: sqlite3.Connection) -> None:
    """Migration 8: judgments in parts (`head`, `tail`, `extra`, which migration 11 folds into
    one payload) with their judge and prompt once in `judgment_sources`, keys as raw bytes."""
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
        for row in batch:  # a schema 7 row (columns, fingerprint, JSON) as schema 8 keeps it
            key, qid, did, judge, model, name, version, sha, status, grade = row[:10]
            source = sources_for_columns(judge, model, name, version, sha, row[11])
            try:
                judgment = Judgment.model_validate_json(row[12])
                ids = (judgment.key, judgment.query_id, judgment.doc_id)
                kept = f'{{"judge":{source.judge_json},"prompt":{source.prompt_json}}}'
                if (*ids, judgment.status, judgment.grade) != (key, qid, did, status, grade) or (
                    judgment.model_dump_json(include={"judge", "prompt"}) != kept
                ):  # the JSON's judge and prompt are dropped for the source's: they must agree
                    raise ValueError(f"the judgment of {qid} {did} does not fit its columns")
                head, tail, more = (judgment.model_dump_json(include=p)[1:-1] for p in _PARTS)
            except ValueError as exc:
                message = f"the judgment of key {row[0]} is unreadable: {exc}"
                raise sqlite3.DatabaseError(message) from None
            created = time_text(judgment.created_at)
            columns = (status, grade, created, head, tail, None if more == DEFAULT_EXTRA else more)
            rows.append((encode_key(key), qid, did, source_id(conn, source, cache), *columns))
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


# Schema 7: judge fingerprints kept once (by id), and the id pairs as a WITHOUT ROWID table (no
# second copy of each key).
SCHEMA7_STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE judge_fingerprints (
        id INTEGER PRIMARY KEY,
        fingerprint TEXT NOT NULL UNIQUE
    )""",
    "INSERT OR IGNORE INTO judge_fingerprints (fingerprint)"
    " SELECT fingerprint FROM judgments WHERE fingerprint IS NOT NULL",
    judgments_table("judgments_lean", "fingerprint_id INTEGER REFERENCES judge_fingerprints (id)"),
    "INSERT INTO judgments_lean SELECT j.key, j.query_id, j.doc_id, j.judge, j.model,"
    " j.prompt_name, j.prompt_version, j.prompt_sha, j.status, j.grade, j.created_at,"
    " f.id, j.judgment FROM judgments j LEFT JOIN judge_fingerprints f"
    " ON f.fingerprint = j.fingerprint",
    "DROP TABLE judgments",
    "ALTER TABLE judgments_lean RENAME TO judgments",
    "CREATE INDEX judgments_pair ON judgments (query_id, doc_id)",
    "CREATE INDEX judgments_judge ON judgments (judge, prompt_name, status)",
    pairs_table("judgment_pairs_lean") + " WITHOUT ROWID",
    "INSERT INTO judgment_pairs_lean SELECT key, query_id, doc_id FROM judgment_pairs",
    "DROP TABLE judgment_pairs",
    "ALTER TABLE judgment_pairs_lean RENAME TO judgment_pairs",
)


# Batch API jobs (owner: grader.batch). A job's `phase` lets another process continue it; an
# item's `outcome` is `batch`, `live` or `failed`; `base_url` is the endpoint, never the key.
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
    """Add `batch_jobs.base_url` (never the key) unless a store migrated by hand has it."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(batch_jobs)")}
    if "base_url" not in columns:
        conn.execute("ALTER TABLE batch_jobs ADD COLUMN base_url TEXT")


# Batch file exports (owner: grader.batch.files.exports): the judge's configuration, each request
# file, one line per content key. A line's `custom_id` is `relgrade:EXPORT_ID:KEY`.
EXPORT_STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE exports (
        export_id TEXT PRIMARY KEY,
        judge_config TEXT NOT NULL,
        out_dir TEXT NOT NULL,
        n_lines INTEGER NOT NULL DEFAULT 0,
        n_pairs INTEGER NOT NULL DEFAULT 0,
        complete INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    )""",
    """CREATE TABLE export_files (
        export_id TEXT NOT NULL REFERENCES exports (export_id),
        file_no INTEGER NOT NULL,
        path TEXT NOT NULL,
        lines INTEGER NOT NULL,
        bytes INTEGER NOT NULL,
        sha256 TEXT NOT NULL,
        PRIMARY KEY (export_id, file_no)
    )""",
    """CREATE TABLE export_lines (
        export_id TEXT NOT NULL,
        key TEXT NOT NULL,
        file_no INTEGER NOT NULL,
        query_id TEXT NOT NULL,
        doc_id TEXT NOT NULL,
        outcome TEXT CHECK (outcome IS NULL OR outcome IN ('ok', 'failed')),
        PRIMARY KEY (export_id, key)
    ) WITHOUT ROWID""",
    "CREATE INDEX export_lines_file ON export_lines (export_id, file_no, outcome)",
)


# Schema 9: export_lines in file order (an import sets outcomes on neighbouring rows), numbered
# from 1; lines exported before schema 9 are numbered in key order within their file.
EXPORT_LINES_IN_FILE_ORDER: tuple[str, ...] = (
    """CREATE TABLE export_lines_9 (
        export_id TEXT NOT NULL,
        file_no INTEGER NOT NULL,
        line_no INTEGER NOT NULL,
        key TEXT NOT NULL,
        query_id TEXT NOT NULL,
        doc_id TEXT NOT NULL,
        outcome TEXT CHECK (outcome IS NULL OR outcome IN ('ok', 'failed')),
        PRIMARY KEY (export_id, file_no, line_no)
    ) WITHOUT ROWID""",
    """INSERT INTO export_lines_9 (export_id, file_no, line_no, key, query_id, doc_id, outcome)
    SELECT export_id, file_no,
        ROW_NUMBER() OVER (PARTITION BY export_id, file_no ORDER BY key),
        key, query_id, doc_id, outcome
    FROM export_lines""",
    "DROP TABLE export_lines",
    "ALTER TABLE export_lines_9 RENAME TO export_lines",
    "CREATE UNIQUE INDEX export_lines_key ON export_lines (export_id, key)",
)


# Schema 11: a judgments row keeps its columns and one payload (grader.store.judgment_rows).
# Schema 8's parts are consecutive runs of the fields pydantic wrote, so folding them in SQL gives
# the payload the encoder writes.
FOLD_STATEMENTS: tuple[str, ...] = (
    "DROP VIEW IF EXISTS judgment_rows",
    judgments_table8("judgments_v10", "payload TEXT NOT NULL"),
    "INSERT INTO judgments_v10 (rowid, key, query_id, doc_id, source_id, status, grade,"
    " created_at, payload) SELECT rowid, key, query_id, doc_id, source_id, status, grade,"
    f" created_at, '{{' || head || ',' || tail || ',' || ifnull(extra, '{DEFAULT_EXTRA}') || '}}'"
    " FROM judgments ORDER BY rowid",
    "DROP TABLE judgments",
    "ALTER TABLE judgments_v10 RENAME TO judgments",
    *INDEXES,
)


@dataclass(frozen=True)
class Migration:
    """One schema step: SQL statements run in order, or a function given the connection."""

    version: int
    name: str
    statements: tuple[str, ...] = ()
    apply: Callable[[sqlite3.Connection], None] | None = None
    vacuum: bool = False  # rewrite the file after it, giving back the space it freed

    def run(self, conn: sqlite3.Connection, applied_at: str) -> None:
        """Apply this step and record it (in the caller's transaction)."""
        for statement in self.statements:
            conn.execute(statement)
        if self.apply is not None:
            self.apply(conn)
        conn.execute(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
            (self.version, self.name, applied_at),
        )
        conn.execute(f"PRAGMA user_version = {int(self.version)}")


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
    Migration(5, "batch file exports", EXPORT_STATEMENTS),
    Migration(6, "batch job endpoint", apply=add_base_url_column),
    Migration(7, "judge fingerprints kept once", SCHEMA7_STATEMENTS, vacuum=True),
    # Judgments in parts, judge and prompt once in `judgment_sources` (grader.store.schema8).
    Migration(8, "judgments in parts", apply=upgrade_to_parts, vacuum=True),
    Migration(9, "export lines in file order", EXPORT_LINES_IN_FILE_ORDER),
    # Each HTTP attempt's output mode, refusals included (rows `mode_rejected`).
    Migration(10, "call output mode", ("ALTER TABLE calls ADD COLUMN output_mode TEXT",)),
    Migration(11, "judgments as columns and one payload", FOLD_STATEMENTS, vacuum=True),
]


def latest_version() -> int:
    """The schema version this relgrade writes."""
    return MIGRATIONS[-1].version if MIGRATIONS else 0
