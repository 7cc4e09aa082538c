"""Where a store's journals are, read without opening the store (opening replays them)."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from grader.store.journal import journals, stored_id


def read_store_id(path: Path) -> str | None:
    """The id of the store file at `path` (read only), or None (no store, or no id yet)."""
    if not path.is_file():
        return None
    with contextlib.closing(
        sqlite3.connect(f"file:{path.resolve()}?mode=ro", uri=True, timeout=30)
    ) as conn:
        return stored_id(conn)


def journal_path(store_path: Path) -> Path:
    """Where the journal of the store at `store_path` lives (`journals`)."""
    return journals(store_path, read_store_id(store_path))[0].path
