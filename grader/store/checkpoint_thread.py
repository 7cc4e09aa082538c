"""Checkpoints of a store's write-ahead log on a thread of their own, for bulk writes: inside
`checkpoints_beside` the writers do not checkpoint at commit, so the copy and its disk waits overlap
their work (sqlite3 releases the GIL). Durability is SQLite's as before."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

DEFAULT_AUTOCHECKPOINT = 1000  # pages: SQLite's default


class Writer(Protocol):
    """What holds a connection that writes (`Store`, `ExportState`)."""

    def set_autocheckpoint(self, pages: int) -> None: ...


class Checkpoints:
    """The thread that checkpoints; `due()` asks for a checkpoint."""

    def __init__(self, path: str | Path) -> None:
        self._path = path
        self._asked = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="relgrade-checkpoints", daemon=True)
        self._thread.start()

    def due(self) -> None:
        """Ask for a checkpoint (one more after the one running, if any)."""
        self._asked.set()

    def stop(self) -> None:
        """Checkpoint once more (what was committed before this call) and end the thread."""
        self._stopping = True
        self._asked.set()
        self._thread.join()

    def _run(self) -> None:
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        with contextlib.closing(conn):
            while True:
                self._asked.wait()
                self._asked.clear()
                last = self._stopping  # (set before the event: read after clearing it)
                # A failed checkpoint loses nothing: the log keeps every commit, and the
                # writers' connections checkpoint again once this thread is stopped.
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                if last:
                    return


@contextlib.contextmanager
def checkpoints_beside(path: str | Path, writers: Sequence[Writer]) -> Iterator[Checkpoints]:
    """`writers` of the store at `path` stop checkpointing at commit; a thread does it, asked."""
    for writer in writers:
        writer.set_autocheckpoint(0)
    checkpoints = Checkpoints(path)
    try:
        yield checkpoints
    finally:
        checkpoints.stop()
        for writer in writers:
            with contextlib.suppress(sqlite3.Error):
                writer.set_autocheckpoint(DEFAULT_AUTOCHECKPOINT)
