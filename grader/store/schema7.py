"""Migration 7's statements: judge fingerprints kept once (by id), and the id pairs as a WITHOUT
ROWID table (no second copy of each key)."""

from __future__ import annotations


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


def pairs_table(name: str) -> str:
    """The id pairs of each content key (schema 3, and 7's copy of it)."""
    return f"""CREATE TABLE {name} (
        key TEXT NOT NULL,
        query_id TEXT NOT NULL,
        doc_id TEXT NOT NULL,
        PRIMARY KEY (key, query_id, doc_id)
    )"""


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
