"""A connection of its own beside the Store's to a store file (WAL lets them sit side by side),
for tables other modules own: Batch API jobs (`grader.batch.api.state`) and batch file exports
(`grader.batch.files.exports`)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from grader.errors import StoreError
from grader.store.disk_full import full_error, is_full
from grader.store.store import BUSY_TIMEOUT_MS


def connect_beside(
    path: str | Path, table: str, what: str, *, pragmas: Sequence[str] = ()
) -> sqlite3.Connection:
    """An autocommit connection to the store at `path` that waits `BUSY_TIMEOUT_MS` for a lock,
    runs `pragmas`, and checks `table` can be read; else StoreError ("cannot read the `what`")."""
    try:
        conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        for pragma in pragmas:
            conn.execute(f"PRAGMA {pragma}")
        conn.execute(f"SELECT 1 FROM {table} LIMIT 1")
    except sqlite3.DatabaseError as exc:
        if is_full(exc, path):
            raise full_error(path, f"opening the {what}") from None
        raise StoreError(f"{path}: cannot read the {what} ({exc})") from None
    return conn


def now_iso() -> str:
    """The time now (UTC, ISO 8601), as the store's tables record it."""
    return datetime.now(UTC).isoformat()
