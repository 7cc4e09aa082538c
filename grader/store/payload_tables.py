"""Schema 11: a judgments row keeps its columns and one payload (`grader.store.judgment_rows`).

Schema 8 cut the JSON of a judgment's other fields at five field names into `head`, `tail` and
`extra` (`grader.store.schema8`), so a field added to the model meant new seams and a migration.
Now those fields are one payload, written by one encoder. The migration folds each row's parts
into its payload in SQL: the parts are consecutive runs of the fields pydantic wrote, in the
model's order, so `{head,tail,extra}` is the payload the encoder writes of the same judgment. The
view `judgment_rows` is dropped here and made again when a store opens.
"""

from __future__ import annotations

from grader.store.schema8 import DEFAULT_EXTRA

JUDGMENTS_TABLE = """CREATE TABLE judgments_v10 (
    key BLOB NOT NULL,
    query_id TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    source_id INTEGER NOT NULL REFERENCES judgment_sources (id),
    status TEXT NOT NULL CHECK (status IN ('ok', 'failed')),
    grade INTEGER CHECK (grade IS NULL OR grade BETWEEN 0 AND 3),
    created_at TEXT NOT NULL,
    payload TEXT NOT NULL,
    CHECK ((status = 'ok') = (grade IS NOT NULL))
)"""

FOLD_STATEMENTS: tuple[str, ...] = (
    "DROP VIEW IF EXISTS judgment_rows",
    JUDGMENTS_TABLE,
    "INSERT INTO judgments_v10 (rowid, key, query_id, doc_id, source_id, status, grade,"
    " created_at, payload) SELECT rowid, key, query_id, doc_id, source_id, status, grade,"
    f" created_at, '{{' || head || ',' || tail || ',' || ifnull(extra, '{DEFAULT_EXTRA}') || '}}'"
    " FROM judgments ORDER BY rowid",
    "DROP TABLE judgments",
    "ALTER TABLE judgments_v10 RENAME TO judgments",
    "CREATE UNIQUE INDEX judgments_key ON judgments (key)",
    "CREATE INDEX judgments_source ON judgments (source_id, status)",
)
