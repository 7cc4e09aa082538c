"""Writing the store: a mixin of `grader.store.store.Store`. A judgment's row goes through the one
encoder (`grader.store.judgment_rows.encode`), secrets masked; `rows` makes the rows the journal
keeps while the store is busy (`write_rows` stores them later)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import astuple
from datetime import UTC, datetime
from typing import Any

from grader.models import CallRecord, Doc, Judgment, PromptRef, Query
from grader.redact import redact
from grader.store.claims import release_stored
from grader.store.journal import Rows
from grader.store.judgment_rows import (
    Source,
    StoredRow,
    encode,
    encode_key,
    encode_keys,
    from_journal_row,
    prompt_columns,
    replaceable,
    source_id,
    sources_for_columns,
)

# An ok judgment keeps its place unless the new one is ok and the row may be replaced (last
# parameter, see `StoredRow.replaceable`).
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

INSERT_PAIR = "INSERT OR IGNORE INTO judgment_pairs (key, query_id, doc_id) VALUES (?, ?, ?)"

# A call row, unless it is already there (a journal may be replayed twice).
INSERT_CALL = """
INSERT INTO calls (key, attempt, status, http_status, latency_ms, prompt_tokens,
                   completion_tokens, cached_tokens, error_type, error_message, created_at,
                   output_mode)
SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?
WHERE NOT EXISTS (SELECT 1 FROM calls WHERE key IS ?1 AND attempt IS ?2 AND status IS ?3
                  AND created_at = ?11)
"""


def now_text() -> str:
    """The time now (UTC, ISO 8601), as the store's rows record it."""
    return datetime.now(UTC).isoformat()


DocRow = tuple[str, str, str | None, str]


def doc_row(doc: Doc) -> DocRow:
    """A document's row in `docs`: id, text, title and its metadata as sorted JSON."""
    metadata = json.dumps(doc.metadata, sort_keys=True, default=str) if doc.metadata else "{}"
    return doc.doc_id, doc.text, doc.title, metadata


def text_rows(
    queries: Iterable[Query], docs: Iterable[Doc]
) -> tuple[list[tuple[str, str]], list[DocRow]]:
    """The rows `Store.put_text_rows` keeps of queries and documents."""
    return [(q.query_id, q.text) for q in queries], [doc_row(d) for d in docs]


class StoreWriting:
    """The writing methods of `Store` (see the module docstring)."""

    _secrets: tuple[str, ...]
    _sources: dict[tuple[int, str, PromptRef | None], tuple[Mapping[str, Any] | None, Source]]

    @property
    def _conn(self) -> sqlite3.Connection:
        raise NotImplementedError  # Store's connection of this thread

    def _transaction(self, what: str = "writing to the store") -> AbstractContextManager[None]:
        raise NotImplementedError  # Store's

    def add_secrets(self, secrets: Sequence[str]) -> None:
        """Also mask these strings (e.g. an API key known only after opening) in what is written."""
        self._secrets = tuple(dict.fromkeys([*self._secrets, *(s for s in secrets if s)]))
        self._sources.clear()  # their fingerprints' JSON is masked again when next asked

    def _mask(self, text: str) -> str:
        return redact(text, self._secrets)

    def source_for(
        self, judge: str, prompt: PromptRef | None, fingerprint: Mapping[str, Any] | None
    ) -> Source:
        """The source row of a judge's judgments (its fingerprint's JSON masked), made once
        for the same judge, prompt and fingerprint object."""
        cache_key = (id(fingerprint), judge, prompt)
        known = self._sources.get(cache_key)
        if known is None or known[0] is not fingerprint:
            if len(self._sources) >= 1024:  # fingerprints made anew per answer
                self._sources.clear()
            model = text = None
            if fingerprint is not None:
                model = fingerprint.get("model")
                text = self._mask(json.dumps(fingerprint, sort_keys=True))
            model = None if model is None else str(model)
            source = sources_for_columns(judge, model, *prompt_columns(prompt), text)
            known = self._sources[cache_key] = (fingerprint, source)
        return known[1]

    def stored_rows(
        self, items: Iterable[tuple[Judgment, Mapping[str, Any] | None]]
    ) -> list[StoredRow]:
        """The rows the store writes of these judgments (`encode`, secrets masked)."""
        return [
            self.stored_row(vars(j), self.source_for(j.judge, j.prompt, fp), replaceable(j))
            for j, fp in items
        ]

    def stored_row(
        self, fields: Mapping[str, Any], source: Source, replaceable: int = 0
    ) -> StoredRow:
        """The row of a judgment with these fields by name (`encode`), secrets masked, from
        `source`: an import makes a million without the Judgment."""
        columns = encode(fields)
        if self._secrets:
            columns = (*columns[:6], self._mask(columns[6]))
        return StoredRow(columns, source, replaceable)

    def rows(
        self,
        judgments: Iterable[tuple[Judgment, Mapping[str, Any] | None]],
        calls: Iterable[CallRecord] = (),
    ) -> Rows:
        """The rows the store would write for these judgments and calls (secrets masked), to
        keep in the journal until `write_rows` stores them."""
        return Rows(
            [self._journal_row(j, self.source_for(j.judge, j.prompt, fp)) for j, fp in judgments],
            [self._call_row(c) for c in calls],
        )

    def _journal_row(self, judgment: Judgment, source: Source) -> tuple[Any, ...]:
        """A judgment as schema 7 kept it (columns, fingerprint, whole JSON), and whether it may
        be replaced (`from_journal_row` reads it back)."""
        return (
            judgment.key,
            judgment.query_id,
            judgment.doc_id,
            *astuple(source)[:5],  # judge, model, prompt name, version, sha
            judgment.status,
            judgment.grade,
            judgment.created_at.isoformat(),
            source.fingerprint,
            self._mask(judgment.model_dump_json()),
            replaceable(judgment),
        )

    def _call_row(self, record: CallRecord) -> tuple[Any, ...]:
        message = record.error_message
        return (
            record.key,
            record.attempt,
            record.outcome,
            record.http_status,
            record.latency_ms,
            record.usage.prompt_tokens,
            record.usage.completion_tokens,
            record.usage.cached_tokens,
            record.error_type,
            None if message is None else self._mask(message),
            now_text(),
            record.output_mode,
        )

    def put_many(
        self,
        items: Iterable[tuple[Judgment, Mapping[str, Any] | None]],
        calls: Iterable[CallRecord] = (),
    ) -> int:
        """Store judgments with their fingerprints, and HTTP attempts, in one transaction, releasing
        this process's leases on their keys; how many judgments were written."""
        items = list(items)
        call_rows = [self._call_row(c) for c in calls]
        keys = [judgment.key for judgment, _ in items]
        return self._write([self.stored_rows(items)], calls=call_rows, release=keys)[0]

    def write_rows(self, rows: Rows) -> None:
        """Store rows from `rows()` in one transaction; writing them twice changes nothing."""
        parts = [[from_journal_row(row) for row in rows.judgments]]
        keys = [row[0] for row in rows.judgments]
        self._write(parts, "writing journaled answers", calls=rows.calls, release=keys)

    def write_stored_parts(
        self, parts: Sequence[Sequence[StoredRow]], *, pairs: bool = True
    ) -> list[int]:
        """Store parts of rows already made (an import's) in one transaction; how many of each
        part were written. `pairs=False`: their id pairs are listed already. Takes no lease."""
        return self._write(parts, "writing imported answers", pairs=pairs)

    def _write(
        self,
        parts: Sequence[Sequence[StoredRow]],
        what: str = "writing to the store",
        *,
        pairs: bool = True,
        calls: Sequence[tuple[Any, ...]] = (),
        release: Sequence[str] = (),
    ) -> list[int]:
        """Store `parts` (with their id pairs unless `pairs` is false) and call rows, releasing this
        process's leases on `release`, in one transaction; how many of each part were written."""
        with self._transaction(what):
            written = [self._upsert_stored(rows) for rows in parts]
            for rows in parts if pairs else ():
                self._conn.executemany(INSERT_PAIR, (r.columns[:3] for r in rows))
            self._conn.executemany(INSERT_CALL, calls)
            release_stored(self._conn, release)
        return written

    def _upsert_stored(self, rows: Sequence[StoredRow]) -> int:
        """Write rows in the caller's transaction; how many were written."""
        conn = self._conn
        sources: dict[str, int] = {}  # ids of this transaction (a rollback forgets new ones)
        params = [
            (*columns[:3], source_id(conn, source, sources), *columns[3:], may_replace)
            for columns, source, may_replace in rows
        ]
        return conn.executemany(UPSERT_JUDGMENT, params).rowcount

    def put_pairs(self, pairs: Iterable[tuple[str, str, str]]) -> None:
        """Record (key, query_id, doc_id): the id pair's texts give that content key. A pair
        whose key has no judgment yet is listed once one is stored (see `iter_pair_judgments`)."""
        rows = pairs if isinstance(pairs, Sequence) else list(pairs)
        blob = encode_keys([k for k, _, _ in rows])
        if blob is None:
            encoded: Iterable[tuple[bytes | str, str, str]] = (
                (encode_key(k), q, d) for k, q, d in rows
            )
        else:  # every key decoded in one go
            encoded = ((blob[i * 32 : i * 32 + 32], q, d) for i, (_, q, d) in enumerate(rows))
        with self._transaction():
            self._conn.executemany(INSERT_PAIR, encoded)

    def put_text_rows(self, queries: Iterable[tuple[str, str]], docs: Iterable[DocRow]) -> None:
        """Keep the texts (rows of `text_rows`) so the store alone can regrade them later."""
        with self._transaction():
            self._conn.executemany(UPSERT_QUERY, queries)
            self._conn.executemany(UPSERT_DOC, docs)
