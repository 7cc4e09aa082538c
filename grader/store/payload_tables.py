"""Schema 11: a judgments row keeps its columns and one payload (`grader.store.judgment_rows`).

Schema 8's parts (`head`, `tail`, `extra`) are consecutive runs of the fields pydantic wrote, so
folding them in SQL gives the payload the encoder writes. The view is made again on open.
"""

from __future__ import annotations

from grader.store.schema8 import DEFAULT_EXTRA, INDEXES, judgments_table

FOLD_STATEMENTS: tuple[str, ...] = (
    "DROP VIEW IF EXISTS judgment_rows",
    judgments_table("judgments_v10", "payload TEXT NOT NULL"),
    "INSERT INTO judgments_v10 (rowid, key, query_id, doc_id, source_id, status, grade,"
    " created_at, payload) SELECT rowid, key, query_id, doc_id, source_id, status, grade,"
    f" created_at, '{{' || head || ',' || tail || ',' || ifnull(extra, '{DEFAULT_EXTRA}') || '}}'"
    " FROM judgments ORDER BY rowid",
    "DROP TABLE judgments",
    "ALTER TABLE judgments_v10 RENAME TO judgments",
    *INDEXES,
)
