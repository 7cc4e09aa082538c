"""Set-based lookups of a run's content keys, for runs of a million pairs.

A rerun decides which pairs are already answered with one join of a temporary table of its keys
against the judgments table (no judgment is parsed), and streams the stored JSON of the answers
it reuses straight to its outputs, rebinding only the two id fields (`rebind`). Reads use their
own connection to the store file, so they work after the run's `Store` is closed.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic_core import to_json

from grader.errors import StoreError
from grader.models import Judgment

_DECODER = json.JSONDecoder()
_QID = '{"query_id":'
_DID = ',"doc_id":'
_SHA = '"sha256":"'
_LOWER_HEX64 = re.compile(r"[0-9a-f]{64}")
_USAGE = '"usage":{"prompt_tokens":'
_TAIL = ',"judges":null,"disagreement":null,"verification":null}'
SCAN_RATIO = 4  # scan the judgments when the run has at least 1/SCAN_RATIO as many keys


def _connect(path: str | Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, timeout=30.0)
    conn.execute("PRAGMA temp_store = MEMORY")
    return conn


def _fill(conn: sqlite3.Connection, rows: Sequence[tuple[str, str, str]]) -> None:
    """The temporary table `run_keys(idx, key, query_id, doc_id)` of `rows`, idx from 0."""
    conn.execute(
        "CREATE TEMP TABLE run_keys (idx INTEGER PRIMARY KEY, key TEXT NOT NULL,"
        " query_id TEXT NOT NULL, doc_id TEXT NOT NULL)"
    )
    conn.executemany(
        "INSERT INTO run_keys VALUES (?, ?, ?, ?)",
        ((i, k, q, d) for i, (k, q, d) in enumerate(rows)),
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
            wanted = {key for key, _, _ in rows}
            statuses = {
                key: status
                for key, status in conn.execute("SELECT key, status FROM judgments")
                if key in wanted
            }
        else:
            statuses = dict(
                conn.execute(
                    "SELECT j.key, j.status FROM judgments j"
                    " WHERE j.key IN (SELECT key FROM temp.run_keys)"
                )
            )
        unlisted: list[tuple[str, str, str]] = []
        if listed:
            unlisted = conn.execute(
                "SELECT r.key, r.query_id, r.doc_id FROM temp.run_keys r WHERE NOT EXISTS"
                " (SELECT 1 FROM judgment_pairs p WHERE p.key = r.key AND p.query_id = r.query_id"
                " AND p.doc_id = r.doc_id) ORDER BY r.idx"
            ).fetchall()
    finally:
        conn.close()
    return KeyLookup(statuses, unlisted)


def rebind(text: str, query_id: str, doc_id: str) -> str:
    """The stored judgment JSON `text` with its query_id and doc_id set to these (a stored answer
    may have been given to another id pair with the same texts); the rest byte for byte."""
    return _rebind(text, to_json(query_id).decode(), to_json(doc_id).decode())


def canonical(text: str) -> bool:
    """Whether stored judgment JSON of a judge's ok answer is as this version writes it
    (pydantic's compact JSON, a bare lowercase prompt sha), so it can go to the outputs as it is.
    Rows written otherwise (older versions, or a combined / verified judgment) are read through
    the model (`rewritten`). Every field has been in the model since the first store; a field
    added later must be checked here too."""
    if not (text.startswith(_QID + '"') and text.endswith(_TAIL) and _USAGE in text):
        return False
    at = text.find(_SHA)
    if at < 0:
        return True
    at += len(_SHA)
    return text.startswith('"', at + 64) and _LOWER_HEX64.fullmatch(text, at, at + 64) is not None


def rewritten(text: str, query_id: str, doc_id: str) -> tuple[str, int | None]:
    """Stored judgment JSON read through the model (as older versions' rows must be) and
    written as this version writes it, for these ids; with its grade."""
    judgment = Judgment.model_validate_json(text)
    judgment = judgment.model_copy(update={"query_id": query_id, "doc_id": doc_id})
    return judgment.model_dump_json(), judgment.grade


def _rebind(text: str, qid: str, did: str) -> str:
    """`rebind` with the ids already encoded as JSON strings (as pydantic writes them)."""
    if text.startswith(_QID + qid + _DID + did + ","):
        return text
    if not text.startswith(_QID):
        raise ValueError("stored judgment JSON does not start with its query_id")
    _, end = _DECODER.raw_decode(text, len(_QID))
    if not text.startswith(_DID, end):
        raise ValueError("stored judgment JSON has no doc_id after its query_id")
    _, end = _DECODER.raw_decode(text, end + len(_DID))
    return _QID + qid + _DID + did + text[end:]


def iter_stored(
    path: str | Path, rows: Sequence[tuple[str, str, str]]
) -> Iterator[tuple[str, int | None]]:
    """(judgment JSON rebound to the row's ids, stored grade) for each (key, query_id, doc_id)
    of `rows`, in order; raises StoreError when a key is no longer stored."""
    conn = _connect(path)
    try:
        _fill(conn, rows)
        cursor = conn.execute(
            "SELECT r.idx, j.judgment, j.grade FROM temp.run_keys r"
            " LEFT JOIN judgments j ON j.key = r.key ORDER BY r.idx"
        )
        # Each id recurs in many pairs: its JSON string is encoded once.
        qids: dict[str, str] = {}
        dids: dict[str, str] = {}
        for idx, text, grade in cursor:
            key, qid, did = rows[idx]
            if text is None:
                raise StoreError(
                    f"{path}: the stored judgment of {qid} {did} ({key}) is no longer in the"
                    " store (removed while this run wrote its outputs); rerun the same command"
                )
            if not canonical(text):
                yield rewritten(text, qid, did)
                continue
            qjson = qids.get(qid)
            if qjson is None:
                qjson = qids[qid] = to_json(qid).decode()
            djson = dids.get(did)
            if djson is None:
                djson = dids[did] = to_json(did).decode()
            yield _rebind(text, qjson, djson), grade
    finally:
        conn.close()
