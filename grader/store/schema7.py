"""Migration 7's statements (schema 7): judge fingerprints kept once, and the id pairs
without a second copy of each key.

Before it a judgments row held its judge's whole fingerprint (the lexical judge's is ~850 bytes
of settings and stopwords, the same on a million rows) and `judgment_pairs` kept every key twice
(the rowid table and its primary-key index). Now a row names its fingerprint by id, and the
pairs are a WITHOUT ROWID table ordered by (key, query_id, doc_id), which is all its readers
look up by. The judgments' columns and JSON are otherwise as before.
"""

from __future__ import annotations

SCHEMA7_STATEMENTS: tuple[str, ...] = (
    """CREATE TABLE judge_fingerprints (
        id INTEGER PRIMARY KEY,
        fingerprint TEXT NOT NULL UNIQUE
    )""",
    "INSERT OR IGNORE INTO judge_fingerprints (fingerprint)"
    " SELECT fingerprint FROM judgments WHERE fingerprint IS NOT NULL",
    """CREATE TABLE judgments_lean (
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
        fingerprint_id INTEGER REFERENCES judge_fingerprints (id),
        judgment TEXT NOT NULL,
        CHECK ((status = 'ok') = (grade IS NOT NULL))
    )""",
    "INSERT INTO judgments_lean SELECT j.key, j.query_id, j.doc_id, j.judge, j.model,"
    " j.prompt_name, j.prompt_version, j.prompt_sha, j.status, j.grade, j.created_at,"
    " f.id, j.judgment FROM judgments j LEFT JOIN judge_fingerprints f"
    " ON f.fingerprint = j.fingerprint",
    "DROP TABLE judgments",
    "ALTER TABLE judgments_lean RENAME TO judgments",
    "CREATE INDEX judgments_pair ON judgments (query_id, doc_id)",
    "CREATE INDEX judgments_judge ON judgments (judge, prompt_name, status)",
    """CREATE TABLE judgment_pairs_lean (
        key TEXT NOT NULL,
        query_id TEXT NOT NULL,
        doc_id TEXT NOT NULL,
        PRIMARY KEY (key, query_id, doc_id)
    ) WITHOUT ROWID""",
    "INSERT INTO judgment_pairs_lean SELECT key, query_id, doc_id FROM judgment_pairs",
    "DROP TABLE judgment_pairs",
    "ALTER TABLE judgment_pairs_lean RENAME TO judgment_pairs",
)
