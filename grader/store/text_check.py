"""Which stored pairs the store cannot regrade by itself: their query or document text is not
kept (graded by an early version, or stored through the library without texts)."""

from __future__ import annotations

from grader.store.store import Store


def pairs_without_texts(store: Store) -> int:
    """How many id pairs with a stored judgment lack their query or document text."""
    row = store._conn.execute(  # read-only query on the store's own connection
        "SELECT COUNT(*) FROM (SELECT DISTINCT p.query_id, p.doc_id FROM judgment_pairs p"
        " JOIN judgments j ON j.key = p.key"
        " WHERE NOT EXISTS (SELECT 1 FROM queries q WHERE q.query_id = p.query_id)"
        " OR NOT EXISTS (SELECT 1 FROM docs d WHERE d.doc_id = p.doc_id))"
    ).fetchone()
    return int(row[0])
