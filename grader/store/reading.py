"""Reading the store: `StoreReading`, a mixin of `Store` (judgments with JSON put together in SQL,
id pairs, texts, the call log); and set-based lookups of a run's million keys (`look_up`,
`StoredReader`) on connections of their own, so they work after the run's `Store` is closed."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.errors import StoreError
from grader.models import Doc, Judgment, Query
from grader.store.judgment_rows import decode_key, encode_key, encode_keys, id_json, json_sql

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


SCAN_RATIO = 4  # scan the judgments when the run has at least 1/SCAN_RATIO as many keys
BLOCK = 20_000  # rows fetched per query while streaming outputs
CACHE_KIB = 262_144  # SQLite page cache of a lookup connection (256 MiB)

Row = tuple[bytes | str, str, str]  # (stored key, query_id, doc_id)
StoredRef = tuple[int, str, str, bytes | str]  # (judgments rowid, query_id, doc_id, stored key)


def _connect(path: str | Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=30.0)
    conn.execute("PRAGMA temp_store = MEMORY")
    conn.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
    return conn


@dataclass
class KeyLookup:
    """What the store holds for a run's rows (stored key, query_id, doc_id)."""

    rowids: list[int]  # per row: the judgments row of its key, 0 when not stored
    ok: bytearray  # per row: 1 when its key is stored ok
    stored_ok: int = 0  # distinct keys stored ok
    stored_failed: int = 0  # distinct keys stored failed
    unlisted: list[int] = field(default_factory=list)  # rows stored ok whose id pair is unlisted


def look_up(path: str | Path, rows: Sequence[Row], *, listed: bool = True) -> KeyLookup:
    """Where each row's key is stored and with what status, and (with `listed`; a dry run needs
    none) which rows stored ok have an id pair the store's list of id pairs per key lacks."""
    conn = _connect(path)
    try:
        (stored,) = conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM judgments").fetchone()
        scan = len(rows) * SCAN_RATIO >= stored
        found = _stored(conn, rows, scan)
        lookup = KeyLookup([0] * len(rows), bytearray(len(rows)))
        maybe_unlisted: list[int] = []
        for i, (key, qid, did) in enumerate(rows):
            hit = found.get(key)
            if hit is None:
                continue
            rowid, status, row_qid, row_did = hit
            lookup.rowids[i] = rowid
            if status == "ok":
                lookup.ok[i] = 1
                # A row's own id pair is always listed; another one sharing its texts may not be.
                if qid != row_qid or did != row_did:
                    maybe_unlisted.append(i)
        statuses = [hit[1] for hit in found.values()]
        lookup.stored_ok = statuses.count("ok")
        lookup.stored_failed = len(statuses) - lookup.stored_ok
        if listed and maybe_unlisted:  # those whose (key, query_id, doc_id) is not listed
            sql = "SELECT 1 FROM judgment_pairs WHERE key = ? AND query_id = ? AND doc_id = ?"
            lookup.unlisted = [
                i for i in maybe_unlisted if not conn.execute(sql, rows[i]).fetchone()
            ]
    finally:
        conn.close()
    return lookup


Hit = tuple[int, str, str, str]  # (rowid, status, the row's query_id, doc_id)


def _stored(conn: sqlite3.Connection, rows: Sequence[Row], scan: bool) -> dict[bytes | str, Hit]:
    """The stored rows of the run's keys: by one sequential scan when the run names most of the
    store (cheaper than an index probe per key), else by a join of a temporary table of them."""
    wanted = {key for key, _, _ in rows}
    tables = "judgments j"
    if not scan:
        conn.execute("CREATE TEMP TABLE run_keys (key BLOB PRIMARY KEY) WITHOUT ROWID")
        conn.executemany("INSERT INTO run_keys VALUES (?)", ((k,) for k in wanted))
        tables = "temp.run_keys r JOIN judgments j ON j.key = r.key"
    sql = f"SELECT j.key, j.rowid, j.status, j.query_id, j.doc_id FROM {tables}"
    return {
        key: (rowid, status, qid, did)
        for key, rowid, status, qid, did in conn.execute(sql)
        if key in wanted
    }


@dataclass(frozen=True)
class Block:
    """Consecutive outputs streamed from the store: their `--out` lines and qrels lines."""

    lines: str  # one judgment JSON per line, each ending in a newline
    qrels: str  # `qid 0 docid grade` per output with a grade, each ending in a newline
    count: int


class StoredReader(contextlib.AbstractContextManager["StoredReader"]):
    """Streams stored judgments to a run's outputs through its own connection (`blocks`)."""

    def __init__(self, path: str | Path) -> None:
        self.path = path
        self._conn = _connect(path)

    def close(self) -> None:
        self._conn.close()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _missing(self, part: Sequence[StoredRef], found: set[int]) -> None:
        """Raise StoreError naming the first pair of `part` whose row is gone."""
        for rowid, qid, did, key in part:
            if rowid not in found:
                raise StoreError(
                    f"{self.path}: the stored judgment of {qid} {did} ({decode_key(key)}) is no"
                    " longer in the store (removed while this run wrote its outputs); rerun the"
                    " same command"
                )
        raise StoreError(f"{self.path}: the store changed while this run wrote its outputs")

    def blocks(self, rows: Sequence[StoredRef], *, block: int = BLOCK) -> Iterator[Block]:
        """The outputs of `rows` in order, `block` at a time; StoreError when a row is gone."""
        for start in range(0, len(rows), block):
            yield self._block(rows[start : start + block])

    def _block(self, part: Sequence[StoredRef]) -> Block:
        # SQLite writes each judgment with its row's ids, in the block's order (a row may come
        # twice: pairs sharing a content); a pair whose ids differ has them replaced here.
        found = self._conn.execute(
            f"SELECT j.rowid, j.query_id, j.doc_id, {json_sql('j', 's')},"
            " j.query_id || ' 0 ' || j.doc_id || ' ' || j.grade"
            " FROM json_each(?) e JOIN judgments j ON j.rowid = e.value"
            " JOIN judgment_sources s ON s.id = j.source_id ORDER BY e.key",
            (json.dumps([ref[0] for ref in part]),),
        ).fetchall()
        if [row[0] for row in found] != [ref[0] for ref in part]:
            self._missing(part, {row[0] for row in found})
        lines: list[str] = []
        qrels: list[str] = []
        for (_, qid, did, _), (_, row_qid, row_did, line, qline) in zip(part, found, strict=True):
            if qid != row_qid or did != row_did:
                line = _prefix(qid, did) + line[len(_prefix(row_qid, row_did)) :]
                qline = None if qline is None else f"{qid} 0 {did} {qline.rsplit(' ', 1)[1]}"
            lines.append(line)
            if qline is not None:
                qrels.append(qline)
        return Block("\n".join(lines) + "\n", "\n".join(qrels) + "\n" if qrels else "", len(part))


def _prefix(qid: str, did: str) -> str:
    """The start of a judgment's JSON up to its two ids."""
    return '{"query_id":' + id_json(qid) + ',"doc_id":' + id_json(did)
