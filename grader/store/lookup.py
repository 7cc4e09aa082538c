"""Set-based lookups of a run's content keys, for runs of a million pairs.

A rerun decides which pairs are already answered with one join of a temporary table of its keys
against the judgments table (no judgment is parsed), and streams the stored JSON of the answers
it reuses straight to its outputs: SQLite puts each judgment's parts together with the run's own
ids (`grader.store.judgment_rows`), so no Python step touches its fields. Reads use their own
connection to the store file, so they work after the run's `Store` is closed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from grader.errors import StoreError
from grader.store.judgment_rows import decode_key, encode_key, json_sql

SCAN_RATIO = 4  # scan the judgments when the run has at least 1/SCAN_RATIO as many keys


def _connect(path: str | Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=30.0)
    conn.execute("PRAGMA temp_store = MEMORY")
    return conn


def _fill(conn: sqlite3.Connection, rows: Sequence[tuple[str, str, str]]) -> None:
    """The temporary table `run_keys(idx, key, query_id, doc_id)` of `rows`, idx from 0, keys
    as stored."""
    conn.execute(
        "CREATE TEMP TABLE run_keys (idx INTEGER PRIMARY KEY, key BLOB NOT NULL,"
        " query_id TEXT NOT NULL, doc_id TEXT NOT NULL)"
    )
    conn.executemany(
        "INSERT INTO run_keys VALUES (?, ?, ?, ?)",
        ((i, encode_key(k), q, d) for i, (k, q, d) in enumerate(rows)),
    )


@dataclass
class KeyLookup:
    """What the store holds for a run's (key, query_id, doc_id) rows."""

    statuses: dict[str, str]  # stored status by key, for the keys that are stored
    unlisted: list[tuple[str, str, str]]  # rows whose id pair the store does not list yet


def look_up(
    path: str | Path, rows: Sequence[tuple[str, str, str]], *, listed: bool = True
) -> KeyLookup:
    """The stored status of each key among `rows` (key, query_id, doc_id), and (with `listed`;
    a dry run needs none) the rows whose id pair is not yet in the store's list of id pairs per
    key, in set-based queries."""
    conn = _connect(path)
    try:
        (stored,) = conn.execute("SELECT COALESCE(MAX(rowid), 0) FROM judgments").fetchone()
        scan = len(rows) * SCAN_RATIO >= stored
        if listed or not scan:
            _fill(conn, rows)
        if scan:
            # The run names most of the store (a rerun): one sequential scan beats a random
            # index probe per key (3-4x at 100,000 keys).
            wanted = {encode_key(key) for key, _, _ in rows}
            statuses = {
                decode_key(key): status
                for key, status in conn.execute("SELECT key, status FROM judgments")
                if key in wanted
            }
        else:
            statuses = {
                decode_key(key): status
                for key, status in conn.execute(
                    "SELECT j.key, j.status FROM judgments j"
                    " WHERE j.key IN (SELECT key FROM temp.run_keys)"
                )
            }
        unlisted: list[tuple[str, str, str]] = []
        if listed:
            unlisted = [
                (decode_key(k), q, d)
                for k, q, d in conn.execute(
                    "SELECT r.key, r.query_id, r.doc_id FROM temp.run_keys r WHERE NOT EXISTS"
                    " (SELECT 1 FROM judgment_pairs p WHERE p.key = r.key"
                    " AND p.query_id = r.query_id AND p.doc_id = r.doc_id) ORDER BY r.idx"
                )
            ]
    finally:
        conn.close()
    return KeyLookup(statuses, unlisted)


def iter_stored(
    path: str | Path, rows: Sequence[tuple[str, str, str]]
) -> Iterator[tuple[str, int | None]]:
    """(judgment JSON with the row's ids, stored grade) for each (key, query_id, doc_id) of
    `rows`, in order; raises StoreError when a key is no longer stored."""
    conn = _connect(path)
    try:
        _fill(conn, rows)
        cursor = conn.execute(
            f"SELECT r.idx, {json_sql('j', 's', ids='r')}, j.grade FROM temp.run_keys r"
            " LEFT JOIN judgments j ON j.key = r.key"
            " LEFT JOIN judgment_sources s ON s.id = j.source_id ORDER BY r.idx"
        )
        for idx, text, grade in cursor:
            if text is None:
                key, qid, did = rows[idx]
                raise StoreError(
                    f"{path}: the stored judgment of {qid} {did} ({key}) is no longer in the"
                    " store (removed while this run wrote its outputs); rerun the same command"
                )
            yield text, grade
    finally:
        conn.close()
