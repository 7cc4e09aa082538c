"""The batch tables of a store on a connection of their own (WAL lets it sit beside the
Store's), each write one committed transaction: the Batch API's jobs (`api.state`) and the file
exports (`files.exports`)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Self

from grader.store.busy import roll_back
from grader.store.store import Store, connect_beside

Statements = Sequence[tuple[str, Iterable[Sequence[Any]]]]  # (SQL, rows), run in one transaction


class TablesBeside:
    """A group of tables: `TABLE` one of them (checked readable), `WHAT` how errors name them,
    `LINES` the one with a row per request (key, outcome) of a job or export (`OWNER`)."""

    TABLE = WHAT = LINES = OWNER = ""
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

    def _tx(
        self, statements: Statements, before_commit: Callable[[], object] | None = None
    ) -> None:
        with self._transaction() as conn:
            for sql, rows in statements:
                conn.executemany(sql, rows)
            if before_commit is not None:
                before_commit()

    def _one(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """One statement over `rows`, in a transaction of its own."""
        self._tx([(sql, rows)])

    def set_outcomes(self, owner: int | str, outcomes: dict[str, str]) -> None:
        """Record how each key of job or export `owner` ended: an export's 'ok' or 'failed', a
        job's 'batch', 'live' or 'failed'."""
        if outcomes:
            self._one(
                f"UPDATE {self.LINES} SET outcome = ? WHERE {self.OWNER} = ? AND key = ?",
                ((o, owner, k) for k, o in outcomes.items()),
            )
