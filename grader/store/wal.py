"""How often a connection copies the store's write-ahead log into the store file."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator

BULK_PAGES = 10_000  # WAL pages (8 KiB) a bulk writer lets gather before they are copied


@contextlib.contextmanager
def checkpoint_every(conn: sqlite3.Connection, pages: int) -> Iterator[None]:
    """Within the block, `conn` copies the write-ahead log into the store once it holds
    `pages` pages (SQLite's default: 1,000). A bulk write of random keys rewrites most of a
    large index's pages in each transaction: with the default, each commit was copied (and
    synced) again at once. Every connection that writes in bulk needs it: any connection's
    commit checkpoints a log grown past its own limit, whoever wrote the log."""
    before = conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0]
    conn.execute(f"PRAGMA wal_autocheckpoint = {int(pages)}")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA wal_autocheckpoint = {int(before)}")
