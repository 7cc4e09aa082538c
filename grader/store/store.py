"""The judgment store: SQLite (WAL) keyed by content key, with the texts and a call log (writing:
`grader.store.writing`, reading: `grader.store.reading`). A write waits for the lock, telling
`on_busy` (`no_wait()`: StoreBusyError); `checkpoints_beside` checkpoints on a thread of its own."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Protocol

from grader.errors import NotAStore, StoreError
from grader.spelling import option
from grader.store import busy
from grader.store.journal import Journal, give_id, journals, stored_id
from grader.store.judgment_rows import ROWS_VIEW, view_is_current
from grader.store.migrations import MIGRATIONS, latest_version
from grader.store.reading import StoreReading
from grader.store.writing import StoreWriting, now_text

PAGE_SIZE = 8192  # bytes per page of a new store


def connect_beside(
    path: str | Path, table: str, what: str, *, pragmas: Sequence[str] = ()
) -> sqlite3.Connection:
    """An autocommit connection beside the Store's, for tables other modules own: runs `pragmas`
    and checks `table` can be read; else StoreError ("cannot read the `what`")."""
    try:
        conn = sqlite3.connect(path, isolation_level=None, timeout=30.0)
        for pragma in pragmas:
            conn.execute(f"PRAGMA {pragma}")
        conn.execute(f"SELECT 1 FROM {table} LIMIT 1")
    except sqlite3.DatabaseError as exc:
        if busy.is_full(exc, path):
            raise busy.full_error(path, f"opening the {what}") from None
        raise StoreError(f"{path}: cannot read the {what} ({exc})") from None
    return conn


class Store(StoreWriting, StoreReading, contextlib.AbstractContextManager["Store"]):
    """A judgment store at `path` (created and migrated on open; a journal left beside it is
    replayed). Waits for the write lock while another process holds it, telling `on_busy`."""

    def __init__(
        self,
        path: str | Path,
        *,
        secrets: Sequence[str] = (),
        on_busy: busy.BusyCallback | None = None,
    ) -> None:
        self.path = Path(path)
        self._secrets = tuple(s for s in secrets if s)
        self._sources = {}  # (`StoreWriting.source_for`'s, typed there)
        self.on_busy = on_busy
        # Named by the store's id once it is read; rescue journals for when its disk is full.
        self.journal, *self.rescues = journals(self.path, None)
        self.legacy: list[Journal] = []  # journals named as before ids (a store from then)
        self.store_id = ""
        self._busy_timeout_s = busy.seconds_from_env(
            "RELGRADE_STORE_BUSY_TIMEOUT", busy.BUSY_TIMEOUT_S
        )
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        if self.path.exists() and self.path.is_dir():
            raise NotAStore("is a folder, not a store file", path=self.path)
        if not self.path.parent.exists():
            raise NotAStore("the folder does not exist", path=self.path, hint="create it first")
        try:
            new = not self.path.exists() or self.path.stat().st_size == 0
            if new:  # pages that fit 7 LLM judgments (~1.1 KB), not 3; fixed once in WAL mode
                self._conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
            had_schema = not new and self.schema_version > 0
            self._wait(lambda: self._conn.execute("PRAGMA journal_mode = WAL"), "opening the store")
            self._migrate()
            if not view_is_current(self._conn):  # the view is this version's, made on open
                with self._transaction("making the judgments view"):
                    self._conn.execute("DROP VIEW IF EXISTS judgment_rows")
                    self._conn.execute(ROWS_VIEW)
            self._identify(had_schema)
        except sqlite3.DatabaseError as exc:
            self.close()
            if busy.is_full(exc, self.path):
                raise busy.full_error(self.path, "opening the store") from None
            raise NotAStore(
                f"not a usable relgrade store ({exc})",
                path=self.path,
                hint=option(
                    "point --store at a relgrade store or a new file",
                    "give store= the path of a relgrade store or of a new file",
                ),
            ) from None
        except BaseException:
            self.close()
            raise
        if self.journal_pending():
            try:
                self.replay_journal()
            except BaseException:
                self.close()
                raise

    @property
    def _conn(self) -> sqlite3.Connection:
        """This thread's connection (opened on first use)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            timeout = self._busy_timeout_s
            conn = sqlite3.connect(
                self.path, isolation_level=None, timeout=timeout, check_same_thread=False
            )
            conn.execute("PRAGMA synchronous = NORMAL")
            with self._conns_lock:
                self._conns.append(conn)
            self._local.conn = conn
        return conn

    def set_cache(self, kib: int) -> None:
        """Let this thread's connection keep up to `kib` KiB of pages (SQLite's default is
        2 MiB): bulk work over a large store reads the same index pages again and again."""
        self._conn.execute(f"PRAGMA cache_size = -{int(kib)}")

    def set_autocheckpoint(self, pages: int) -> None:
        """Checkpoint this thread's connection at commits past `pages` pages of log (0: never)."""
        self._conn.execute(f"PRAGMA wal_autocheckpoint = {int(pages)}")

    def close(self) -> None:
        """Close the connections (all writes are already committed)."""
        with self._conns_lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            conn.close()
        self._local = threading.local()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        """The schema version of the open store (`PRAGMA user_version`)."""
        row = self._conn.execute("PRAGMA user_version").fetchone()
        return int(row[0])

    def _migrate(self) -> None:
        current = self.schema_version
        newest = latest_version()
        if current > newest:
            raise StoreError(
                f"{self.path}: written by a newer relgrade (store schema {current}, this relgrade "
                f"knows up to {newest}); upgrade relgrade or use another "
                + option("--store", "store")
            )
        vacuum = False
        for migration in MIGRATIONS:
            if migration.version <= current:
                continue
            name = f"schema migration {migration.version} ({migration.name})"
            try:
                with self._transaction(name):
                    # Another process may have migrated while we waited for the lock.
                    if self.schema_version >= migration.version:
                        continue
                    migration.run(self._conn, now_text())
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"{self.path}: {name} failed and was rolled back: {exc}") from None
            # A new store (version 0) has nothing to give back.
            vacuum = vacuum or (migration.vacuum and current > 0)
        if vacuum:
            self._wait(lambda: self._conn.execute("VACUUM"), "compacting the migrated store")

    @contextlib.contextmanager
    def _transaction(self, what: str = "writing to the store") -> Iterator[None]:
        """BEGIN IMMEDIATE (waiting for the lock), then COMMIT, or roll back (a full disk said)."""
        self._wait(lambda: self._conn.execute("BEGIN IMMEDIATE"), what)
        try:
            yield
            self._conn.execute("COMMIT")
        except BaseException as exc:
            busy.roll_back(self._conn, exc, self.path, what)
            raise

    def _wait(self, op: Callable[[], object], what: str) -> None:
        """Run `op` until no other connection's lock stops it (module docstring); in a
        `no_wait()` block, raise StoreBusyError after one attempt instead."""
        wait: busy.BusyWait | None = None
        while True:
            try:
                op()
            except (sqlite3.OperationalError, busy.StoreBusyError) as exc:
                if isinstance(exc, sqlite3.OperationalError) and not busy.is_busy(exc):
                    raise
                if getattr(self._local, "no_wait", False):
                    raise busy.StoreBusyError(
                        f"{self.path}: store busy (held by another process)"
                    ) from None
                if wait is None:
                    wait = busy.BusyWait(self.path, what, self.on_busy)
                wait.failed()
                continue
            if wait is not None:
                wait.done()
            return

    @contextlib.contextmanager
    def no_wait(self) -> Iterator[None]:
        """In this block (this thread) a write whose lock is held raises StoreBusyError at once."""
        before = getattr(self._local, "no_wait", False)
        self._local.no_wait = True
        try:
            yield
        finally:
            self._local.no_wait = before

    def _identify(self, had_schema: bool) -> None:
        """Read (or give) the store's id and name its journals by it; a store made before
        ids (`had_schema`, no id yet) also replays the journals named as then."""
        found = stored_id(self._conn)
        if found is None:
            with self._transaction("giving the store its id"):
                found = give_id(self._conn, now_text())
            if had_schema:
                self.legacy = journals(self.path, None)
        self.store_id = found
        self.journal, *self.rescues = journals(self.path, found)

    def journal_pending(self) -> bool:
        """Whether the journal beside the store, or a rescue journal, holds rows."""
        return any(j.pending() for j in [self.journal, *self.rescues, *self.legacy])

    def replay_journal(self) -> int:
        """Store every row of the store's journals and remove them; how many rows."""
        count = 0
        for journal in [self.journal, *self.rescues, *self.legacy]:
            if journal is not self.journal and not journal.pending():
                continue

            def drain(journal: Journal = journal) -> None:
                nonlocal count
                # One attempt per lock of the journal, so others can append between them.
                with self.no_wait():
                    count += journal.drain(self.write_rows)

            self._wait(drain, "replaying the journal")
        return count


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
