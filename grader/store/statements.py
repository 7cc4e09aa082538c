"""The SQL of the store's writes (`grader.store.store.Store`)."""

# A judgments row (grader.store.judgment_rows); an ok judgment keeps its place unless the new
# one is ok and the row may be replaced (last parameter, see `StoredRow.replaceable`).
UPSERT_JUDGMENT = """
INSERT INTO judgments (key, query_id, doc_id, source_id, status, grade, created_at, payload)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (key) DO UPDATE SET
    query_id = excluded.query_id, doc_id = excluded.doc_id, source_id = excluded.source_id,
    status = excluded.status, grade = excluded.grade, created_at = excluded.created_at,
    payload = excluded.payload
WHERE judgments.status != 'ok' OR (excluded.status = 'ok' AND ? = 1)
"""

UPSERT_QUERY = """
INSERT INTO queries (query_id, text) VALUES (?, ?)
ON CONFLICT (query_id) DO UPDATE SET text = excluded.text WHERE queries.text != excluded.text
"""

UPSERT_DOC = """
INSERT INTO docs (doc_id, text, title, metadata) VALUES (?, ?, ?, ?)
ON CONFLICT (doc_id) DO UPDATE SET text = excluded.text, title = excluded.title,
    metadata = excluded.metadata
WHERE docs.text != excluded.text OR docs.title IS NOT excluded.title
    OR docs.metadata != excluded.metadata
"""

INSERT_PAIR = """
INSERT OR IGNORE INTO judgment_pairs (key, query_id, doc_id) VALUES (?, ?, ?)
"""

INSERT_CALL = """
INSERT INTO calls (key, attempt, status, http_status, latency_ms, prompt_tokens,
                   completion_tokens, cached_tokens, error_type, error_message, created_at,
                   output_mode)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""

# A journaled call row, unless it is already there (the journal may be replayed twice).
INSERT_CALL_ONCE = """
INSERT INTO calls (key, attempt, status, http_status, latency_ms, prompt_tokens,
                   completion_tokens, cached_tokens, error_type, error_message, created_at,
                   output_mode)
SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
WHERE NOT EXISTS (SELECT 1 FROM calls WHERE key IS ?1 AND attempt IS ?2 AND status IS ?3
                  AND created_at = ?11)
"""
