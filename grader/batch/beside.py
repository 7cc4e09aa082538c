"""The batch tables of a store on a connection of their own (WAL lets it sit beside the
Store's), each write one committed transaction: the Batch API's jobs (`api.state`) and the file
exports (`files.exports`)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from typing import Self

from grader.store.disk_full import roll_back
from grader.store.store import Store, connect_beside


class TablesBeside:
    """A group of tables: `TABLE` one of them (checked readable), `WHAT` how errors name them."""

    TABLE = ""
    WHAT = ""
    PRAGMAS: tuple[str, ...] = ()

    def __init__(self, store: Store) -> None:
        self.path = store.path
        self._conn = connect_beside(self.path, self.TABLE, self.WHAT, pragmas=self.PRAGMAS)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One transaction, rolled back (a full disk said) on any exception."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
            self._conn.execute("COMMIT")
        except BaseException as exc:
            roll_back(self._conn, exc, self.path, f"writing the {self.WHAT}")
            raise
