"""Each store's id, kept in the store: its journals are named by it, not by the store's path.

A moved store still finds its journal, and an orphan journal is never replayed into another store
made at the old place. A store from before ids also replays the journal named by its path.
"""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

TABLE = (
    "CREATE TABLE IF NOT EXISTS store_identity ("
    " one INTEGER PRIMARY KEY CHECK (one = 1), store_id TEXT NOT NULL, made_at TEXT NOT NULL)"
)


def stored_id(conn: sqlite3.Connection) -> str | None:
    """The id of the store open on `conn`, or None when it has none yet."""
    try:
        row = conn.execute("SELECT store_id FROM store_identity WHERE one = 1").fetchone()
    except sqlite3.OperationalError:  # no table yet
        return None
    return str(row[0]) if row else None


def give_id(conn: sqlite3.Connection, now: str) -> str:
    """Give the store open on `conn` an id unless it has one (call inside a write
    transaction); its id."""
    conn.execute(TABLE)
    conn.execute(
        "INSERT OR IGNORE INTO store_identity (one, store_id, made_at) VALUES (1, ?, ?)",
        (uuid.uuid4().hex, now),
    )
    found = stored_id(conn)
    assert found is not None
    return found


def read_store_id(path: str | Path) -> str | None:
    """The id of the store file at `path` (read only), or None (no store, or no id yet)."""
    if not Path(path).is_file():
        return None
    try:
        conn = sqlite3.connect(f"file:{Path(path).resolve()}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error:
        return None
    try:
        return stored_id(conn)
    except sqlite3.Error:
        return None
    finally:
        conn.close()
