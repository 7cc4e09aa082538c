"""Reading the store, a mixin of `grader.store.store.Store`: judgments (JSON put together in SQL,
`grader.store.judgment_rows.json_sql`), id pairs, texts, the call log."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from typing import Any

from grader.models import Doc, Judgment, Query
from grader.store.judgment_rows import decode_key, encode_key, encode_keys, json_sql

_CHUNK = 500  # keys per `IN (...)` query, below SQLite's variable limit

# The judgments whose keys are the 32-byte digests joined in ?1 (?2 of them).
_STATUS_OF_DIGESTS = (
    "WITH RECURSIVE i(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM i WHERE n + 1 < ?2)"
    " SELECT j.key, j.status FROM i JOIN judgments j ON j.key = substr(?1, i.n * 32 + 1, 32)"
)


def select_in(
    conn: sqlite3.Connection, sql: str, values: Iterable[Any]
) -> Iterator[tuple[Any, ...]]:
    """The rows of `sql` whose `IN ({})` takes `values` (each once), a chunk at a time."""
    unique = list(dict.fromkeys(values))
    for start in range(0, len(unique), _CHUNK):
        chunk = unique[start : start + _CHUNK]
        yield from conn.execute(sql.format(",".join("?" * len(chunk))), chunk)


class StoreReading:
    """The reading methods of `Store` (see the module docstring)."""

    @property
    def _conn(self) -> sqlite3.Connection:
        raise NotImplementedError  # Store's connection of this thread

    def _by_keys(self, columns: str, keys: Iterable[str]) -> Iterator[tuple[Any, ...]]:
        """`SELECT columns FROM judgment_rows` for the stored judgments among `keys`."""
        sql = f"SELECT {columns} FROM judgment_rows WHERE stored_key IN ({{}})"
        return select_in(self._conn, sql, map(encode_key, keys))

    def get_many(self, keys: Iterable[str]) -> dict[str, Judgment]:
        """The stored judgments (ok and failed) among `keys`, by key."""
        return {
            key: Judgment.model_validate_json(text)
            for key, text in self._by_keys("key, judgment", keys)
        }

    def stamps(self, keys: Iterable[str]) -> dict[str, tuple[str, str]]:
        """(status, created_at) of each stored key among `keys`, without parsing the judgment."""
        return {
            key: (status, created)
            for key, status, created in self._by_keys("key, status, created_at", keys)
        }

    def statuses(self, keys: Iterable[str]) -> dict[str, str]:
        """The stored status ("ok" / "failed") of each key among `keys` that is stored."""
        unique = list(dict.fromkeys(keys))
        blob = encode_keys(unique)
        rows: Iterable[tuple[Any, ...]]
        if blob is not None:  # one statement, one parameter (cheaper than `IN (...)`)
            rows = self._conn.execute(_STATUS_OF_DIGESTS, (blob, len(unique)))
        else:
            sql = "SELECT key, status FROM judgments WHERE key IN ({})"
            rows = select_in(self._conn, sql, map(encode_key, unique))
        return {decode_key(key): status for key, status in rows}

    def iter_pair_judgments(self) -> Iterator[tuple[str, str, Judgment]]:
        """(query_id, doc_id, judgment) for every id pair and judgment stored under its keys, by
        (query_id, doc_id, judge); the judgment's own ids may be another pair's."""
        sql = (
            f"SELECT p.query_id, p.doc_id, j.rowid, {json_sql('j', 's')} FROM judgment_pairs p"
            " JOIN judgments j ON j.key = p.key JOIN judgment_sources s ON s.id = j.source_id"
            " ORDER BY p.query_id, p.doc_id, s.judge, j.key"
        )
        parsed: dict[int, Judgment] = {}
        for qid, did, rowid, text in self._conn.execute(sql):
            judgment = parsed.get(rowid)
            if judgment is None:
                judgment = parsed[rowid] = Judgment.model_validate_json(text)
            yield qid, did, judgment

    def fingerprint(self, key: str) -> dict[str, Any] | None:
        """The judge fingerprint stored with `key`, if any."""
        row = self._conn.execute(
            "SELECT fingerprint FROM judgment_rows WHERE stored_key = ?", (encode_key(key),)
        ).fetchone()
        return None if row is None or row[0] is None else json.loads(row[0])

    def completion_tokens(self, *, judge: str, prompt_sha: str) -> list[int]:
        """The completion tokens of each stored ok judgment of `judge` and prompt `prompt_sha`
        whose usage was reported (more than 0), for the expected size of the next replies."""
        rows = self._conn.execute(
            "SELECT json_extract(j.payload, '$.usage.completion_tokens')"
            " FROM judgments j JOIN judgment_sources s ON s.id = j.source_id"
            " WHERE s.judge = ? AND s.prompt_sha = ? AND j.status = 'ok'",
            (judge, prompt_sha),
        )
        return [int(n) for (n,) in rows if n]

    def prompt_versions(self, name: str) -> dict[str, set[str]]:
        """The versions of prompt `name` the stored judgments record, each with its sha256s."""
        rows = self._conn.execute(
            "SELECT DISTINCT prompt_version, prompt_sha FROM judgment_sources s"
            " WHERE prompt_name = ? AND prompt_version IS NOT NULL AND prompt_sha != ''"
            " AND EXISTS (SELECT 1 FROM judgments j WHERE j.source_id = s.id)",
            (name,),
        )
        found: dict[str, set[str]] = {}
        for version, sha in rows:
            found.setdefault(str(version), set()).add(str(sha))
        return found

    def count(self, *, status: str | None = None) -> int:
        """How many judgments are stored (with `status`, when given)."""
        sql = "SELECT COUNT(*) FROM judgments" + (" WHERE status = ?" if status else "")
        return int(self._conn.execute(sql, (status,) if status else ()).fetchone()[0])

    def queries(self, ids: Iterable[str] | None = None) -> dict[str, Query]:
        """Stored query texts (all, or those among `ids`)."""
        rows = self._select_by_ids("SELECT query_id, text FROM queries", "query_id", ids)
        return {qid: Query(query_id=qid, text=text) for qid, text in rows}

    def docs(self, ids: Iterable[str] | None = None, *, whole: bool = True) -> dict[str, Doc]:
        """Stored documents (all, or those among `ids`) with title and metadata, or (not `whole`)
        their text only: what judging a reply to them reads."""
        if not whole:
            rows = self._select_by_ids("SELECT doc_id, text FROM docs", "doc_id", ids)
            return {did: Doc(doc_id=did, text=text) for did, text in rows}
        rows = self._select_by_ids("SELECT doc_id, text, title, metadata FROM docs", "doc_id", ids)
        return {
            did: Doc(doc_id=did, text=text, title=title, metadata=json.loads(meta))
            for did, text, title, meta in rows
        }

    def long_doc_texts(self, ids: Iterable[str], longer_than: int) -> dict[str, str | None]:
        """The stored documents among `ids`, each with its text when over `longer_than` bytes of
        UTF-8, else None: whether a text was cut, without a string of every text."""
        sql = (
            f"SELECT doc_id, CASE WHEN length(CAST(text AS BLOB)) > {int(longer_than)}"
            " THEN text END FROM docs"
        )
        return dict(self._select_by_ids(sql, "doc_id", ids))

    def query_ids(self, ids: Iterable[str]) -> set[str]:
        """Those of `ids` that are stored queries."""
        rows = self._select_by_ids("SELECT query_id FROM queries", "query_id", ids)
        return {qid for (qid,) in rows}

    def _select_by_ids(
        self, sql: str, column: str, ids: Iterable[str] | None
    ) -> list[tuple[Any, ...]]:
        if ids is None:
            return self._conn.execute(sql).fetchall()
        return list(select_in(self._conn, f"{sql} WHERE {column} IN ({{}})", ids))

    def pairs_without_texts(self) -> int:
        """How many id pairs with a stored judgment lack their query or document text."""
        row = self._conn.execute(
            "SELECT COUNT(*) FROM (SELECT DISTINCT p.query_id, p.doc_id FROM judgment_pairs p"
            " JOIN judgments j ON j.key = p.key"
            " WHERE NOT EXISTS (SELECT 1 FROM queries q WHERE q.query_id = p.query_id)"
            " OR NOT EXISTS (SELECT 1 FROM docs d WHERE d.doc_id = p.doc_id))"
        ).fetchone()
        return int(row[0])

    def calls(self, key: str | None = None) -> list[dict[str, Any]]:
        """The call log (for one key, when given), oldest first."""
        cursor = self._conn.execute(
            "SELECT * FROM calls" + (" WHERE key = ?" if key else "") + " ORDER BY id",
            (key,) if key else (),
        )
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor]
