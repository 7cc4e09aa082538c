"""Another connection holding a store's write lock, as another process would."""

from __future__ import annotations

import sqlite3
from pathlib import Path


class LockHolder:
    """Holds the store's write lock (BEGIN IMMEDIATE) from construction until `release`."""

    def __init__(self, store: Path) -> None:
        self.conn = sqlite3.connect(store, isolation_level=None, check_same_thread=False)
        self.conn.execute("BEGIN IMMEDIATE")

    def release(self) -> None:
        self.conn.execute("COMMIT")
        self.conn.close()
