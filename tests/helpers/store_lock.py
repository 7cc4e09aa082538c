"""Another connection holding a store's write lock, as another process would; the leases a
`ClaimBook` holds, read as another process would."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from grader.store.claims import ClaimBook


class LockHolder:
    """Holds the store's write lock (BEGIN IMMEDIATE) from construction until `release`."""

    def __init__(self, store: Path) -> None:
        self.conn = sqlite3.connect(store, isolation_level=None, check_same_thread=False)
        self.conn.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        self.conn.execute("COMMIT")
        self.conn.close()


def leased(book: ClaimBook) -> list[str]:
    """The keys `book`'s owner holds a lease on."""
    with sqlite3.connect(book.path) as conn:
        rows = conn.execute("SELECT key FROM claims WHERE owner = ?", (book.owner,)).fetchall()
    conn.close()
    return [key for (key,) in rows]
