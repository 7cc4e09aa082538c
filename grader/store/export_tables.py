"""The store tables that keep batch file exports (owner: `grader.batch.files.exports`),
appended to the store's numbered migrations.

An export is one `relgrade batch export`: request files in the OpenAI batch format for any
inference engine (vLLM run-batch, Ray Data, ...), imported back later by `relgrade batch import`,
from any process. It records:

- exports: the judge configuration (model, prompt and its sha256, output mode, fingerprint), the
  folder, how many lines and id pairs it holds, and whether writing it finished (`complete`)
- export_files: each request file with its line count, size and sha256
- export_lines: one line per content key: the request file it is in and its place there, the
  id pair its judgment is stored under, and how its result came back (`outcome`: NULL until
  imported, then `ok` or `failed`). Since schema 9 the rows are kept in file order (file, line)
  with a unique index on the key: an import sets the outcomes of results lines in the order an
  engine writes them, so each transaction touches a few pages in a row instead of one page per
  line at random, and no index holds the outcome.

A line's `custom_id` is `relgrade:EXPORT_ID:KEY`, so a results line names its export and its
content key; a line of another store's export, or a key this export never asked, is refused.
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
