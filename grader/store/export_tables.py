"""The store tables of batch file exports (owner: `grader.batch.files.exports`).

`exports` holds the judge's configuration and whether writing finished, `export_files` each request
file, `export_lines` one line per content key, in file order since schema 9 (an import sets outcomes
on neighbouring rows). A line's `custom_id` is `relgrade:EXPORT_ID:KEY`.
"""

from __future__ import annotations

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


# Schema 9: export_lines in file order (see the module docstring). A line's place in its file is
# numbered from 1; lines exported before schema 9 are numbered in key order within their file.
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
