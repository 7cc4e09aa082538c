"""Set-based lookups of a run's content keys, for runs of a million pairs: which pairs are answered,
without parsing a judgment, and their rows streamed to the outputs with the JSON made in SQL. Own
connections, so they work after the run's `Store` is closed."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from grader.errors import StoreError
from grader.store.judgment_rows import decode_key, id_json, json_sql

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
