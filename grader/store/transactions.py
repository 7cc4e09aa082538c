"""The store's write transactions and its waiting for the write lock: a mixin of
`grader.store.store.Store`. A write waits, as long as it takes, while another process holds the
lock, telling the store's `on_busy` (`grader.store.busy`); in a `no_wait()` block it raises
StoreBusyError after one attempt instead, for a caller that waits its own way (the writer). A
transaction that fails rolls back through the full-disk-aware helper (`grader.store.disk_full`).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType

from grader.store.busy import BusyCallback, BusyWait, StoreBusyError, is_busy
from grader.store.disk_full import roll_back


class Transaction:
    """`with store._transaction(what):` BEGIN IMMEDIATE (waiting for the lock), then COMMIT,
    or a rollback when the block or the commit raises."""

    def __init__(self, store: StoreTransactions, what: str) -> None:
        self.store = store
        self.what = what

    def __enter__(self) -> None:
        self.store._begin(self.what)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        conn = self.store._conn
        if exc is None:
            try:
                conn.execute("COMMIT")
            except BaseException as error:
                exc = error
        if exc is None:
            return
        roll_back(conn, exc, self.store.path, self.what)  # (a full disk: StoreFullError)
        if exc_type is None:
            raise exc


class StoreTransactions:
    """The transactions and lock waiting of `Store` (see the module docstring)."""

    path: Path
    on_busy: BusyCallback | None
    _local: threading.local

    @property
    def _conn(self) -> sqlite3.Connection:
        raise NotImplementedError  # Store's connection of this thread

    def _transaction(self, what: str = "writing to the store") -> Transaction:
        return Transaction(self, what)

    def _wait(self, op: Callable[[], object], what: str) -> None:
        """Run `op` until no other connection's lock stops it (module docstring); in a
        `no_wait()` block, raise StoreBusyError after one attempt instead."""
        wait: BusyWait | None = None
        while True:
            try:
                op()
            except (sqlite3.OperationalError, StoreBusyError) as exc:
                if isinstance(exc, sqlite3.OperationalError) and not is_busy(exc):
                    raise
                if getattr(self._local, "no_wait", False):
                    raise StoreBusyError(
                        f"{self.path}: store busy (held by another process)"
                    ) from None
                if wait is None:
                    wait = BusyWait(self.path, what, self.on_busy)
                wait.failed()
                continue
            if wait is not None:
                wait.done()
            return

    def _begin(self, what: str) -> None:
        self._wait(lambda: self._conn.execute("BEGIN IMMEDIATE"), what)

    @contextlib.contextmanager
    def no_wait(self) -> Iterator[None]:
        """In this block (on this thread) a write whose lock is held raises StoreBusyError after
        one attempt instead of waiting; for a caller that waits its own way (the writer)."""
        before = getattr(self._local, "no_wait", False)
        self._local.no_wait = True
        try:
            yield
        finally:
            self._local.no_wait = before
