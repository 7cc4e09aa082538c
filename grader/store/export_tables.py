"""The store tables that keep batch file exports (owner: `grader.batch.exports`), appended to the
store's numbered migrations.

An export is one `relgrade batch export`: request files in the OpenAI batch format for any
inference engine (vLLM run-batch, Ray Data, ...), imported back later by `relgrade batch import`,
from any process. It records:

- exports: the judge configuration (model, prompt and its sha256, output mode, fingerprint), the
  folder, how many lines and id pairs it holds, and whether writing it finished (`complete`)
- export_files: each request file with its line count, size and sha256
- export_lines: one line per content key: the request file it is in, the id pair its judgment
  is stored under, and how its result came back (`outcome`: NULL until imported, then `ok` or
  `failed`)

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
