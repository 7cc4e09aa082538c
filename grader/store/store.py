"""The judgment store: SQLite (WAL) keyed by content key, with the texts and a call log.

An ok judgment is never replaced by a failure, and a judge's first ok answer is final; only an
output built from answers (ensemble, verification) is replaced by a newer ok one. Storing a
judgment releases this process's lease on its key. Reading is `grader.store.reading`; making
rows is `grader.store.row_making`.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from grader.errors import NotAStore, StoreError
from grader.models import CallRecord, Doc, Judgment, Query
from grader.spelling import option
from grader.store.busy import BusyCallback, busy_timeout_s
from grader.store.claims import release_stored
from grader.store.disk_full import full_error, is_full, roll_back
from grader.store.identity import give_id, stored_id
from grader.store.journal import (
    Journal,
    Rows,
    journal_path,
    legacy_rescue_journals,
    rescue_journals,
)
from grader.store.judgment_rows import (
    Source,
    StoredRow,
    encode_key,
    encode_keys,
    from_journal_row,
    make_view,
    source_id,
    view_is_current,
)
from grader.store.migrations import MIGRATIONS, latest_version
from grader.store.reading import StoreReading
from grader.store.row_making import StoreRows, now_text
from grader.store.statements import (
    INSERT_CALL,
    INSERT_CALL_ONCE,
    INSERT_PAIR,
    UPSERT_DOC,
    UPSERT_JUDGMENT,
    UPSERT_QUERY,
)
from grader.store.transactions import StoreTransactions

BUSY_TIMEOUT_MS = 30_000  # for other tables' own connections (grader.batch.api.state)
PAGE_SIZE = 8192  # bytes per page of a new store


def _pair_rows(rows: Iterable[tuple[Any, ...]]) -> Iterator[tuple[Any, str, str]]:
    """The (stored key, query_id, doc_id) of journal rows (`rows()`), for `judgment_pairs`."""
    return ((encode_key(row[0]), row[1], row[2]) for row in rows)


DocRow = tuple[str, str, str | None, str]


def doc_row(doc: Doc) -> DocRow:
    """A document's row in `docs`: id, text, title and its metadata as sorted JSON."""
    metadata = json.dumps(doc.metadata, sort_keys=True, default=str) if doc.metadata else "{}"
    return doc.doc_id, doc.text, doc.title, metadata


def text_rows(
    queries: Iterable[Query], docs: Iterable[Doc]
) -> tuple[list[tuple[str, str]], list[DocRow]]:
    """The rows `Store.put_text_rows` keeps of queries and documents."""
    return [(q.query_id, q.text) for q in queries], [doc_row(d) for d in docs]


class Store(StoreTransactions, StoreRows, StoreReading):
    """A judgment store at `path` (created and migrated on open; a journal left beside it is
    replayed). Waits for the write lock while another process holds it, telling `on_busy`."""

    def __init__(
        self,
        path: str | Path,
        *,
        secrets: Sequence[str] = (),
        on_busy: BusyCallback | None = None,
    ) -> None:
        self.path = Path(path)
        self._secrets = tuple(s for s in secrets if s)
        self._sources = {}  # (`StoreRows.source_for`'s, typed there)
        self.on_busy = on_busy
        self.journal = Journal(self.path)  # named by the store's id once it is read
        self.rescues: list[Journal] = []  # when the journal's disk is full too
        self.legacy: list[Journal] = []  # journals named as before ids (a store from then)
        self.store_id = ""
        self._busy_timeout_s = busy_timeout_s()
        self._local = threading.local()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        if self.path.exists() and self.path.is_dir():
            raise NotAStore("is a folder, not a store file", path=self.path)
        if not self.path.parent.exists():
            raise NotAStore("the folder does not exist", path=self.path, hint="create it first")
        try:
            had_schema = self.path.exists() and self.path.stat().st_size > 0
            had_schema = had_schema and self.schema_version > 0
            if not self.path.exists() or self.path.stat().st_size == 0:
                # A new store: pages that fit 7 LLM judgments (~1.1 KB) rather than 3, so
                # less of each page is left unused; fixed once in WAL mode.
                self._conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
            self._wait(lambda: self._conn.execute("PRAGMA journal_mode = WAL"), "opening the store")
            self._migrate()
            if not view_is_current(self._conn):  # the view is this version's, made on open
                with self._transaction("making the judgments view"):
                    make_view(self._conn)
            self._identify(had_schema)
        except StoreError:
            self.close()
            raise
        except sqlite3.DatabaseError as exc:
            self.close()
            if is_full(exc, self.path):
                raise full_error(self.path, "opening the store") from None
            raise NotAStore(
                f"not a usable relgrade store ({exc})",
                path=self.path,
                hint=option(
                    "point --store at a relgrade store or a new file",
                    "give store= the path of a relgrade store or of a new file",
                ),
            ) from None
        if self.journal_pending():
            try:
                self.replay_journal()
            except StoreError:
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
            conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            conn.execute("PRAGMA synchronous = NORMAL")
            with self._conns_lock:
                self._conns.append(conn)
            self._local.conn = conn
        return conn

    # ---- lifecycle -----------------------------------------------------------------------

    def set_cache(self, kib: int) -> None:
        """Let this thread's connection keep up to `kib` KiB of pages (SQLite's default is
        2 MiB): bulk work over a large store reads the same index pages again and again."""
        self._conn.execute(f"PRAGMA cache_size = -{int(kib)}")

    def set_autocheckpoint(self, pages: int) -> None:
        """Let this thread's connection checkpoint at the commit that takes the log past
        `pages` pages (0: never; see `grader.store.checkpoint_thread`)."""
        self._conn.execute(f"PRAGMA wal_autocheckpoint = {int(pages)}")

    def close(self) -> None:
        """Close the connections (all writes are already committed)."""
        with self._conns_lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            conn.close()
        self._local = threading.local()

    def __enter__(self) -> Store:
        return self

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
            self._begin(f"schema migration {migration.version} ({migration.name})")
            try:
                # Another process may have migrated while we waited for the lock.
                if self.schema_version >= migration.version:
                    self._conn.execute("COMMIT")
                    continue
                for statement in migration.statements:
                    self._conn.execute(statement)
                if migration.apply is not None:
                    migration.apply(self._conn)
                self._conn.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                    (migration.version, migration.name, now_text()),
                )
                self._conn.execute(f"PRAGMA user_version = {int(migration.version)}")
                self._conn.execute("COMMIT")
                # A new store (version 0) has nothing to give back.
                vacuum = vacuum or (migration.vacuum and current > 0)
            except sqlite3.DatabaseError as exc:
                roll_back(self._conn, exc, self.path, f"schema migration {migration.version}")
                raise StoreError(
                    f"{self.path}: schema migration {migration.version} ({migration.name}) "
                    f"failed and was rolled back: {exc}"
                ) from None
            except BaseException as exc:
                roll_back(self._conn, exc, self.path, f"schema migration {migration.version}")
                raise
        if vacuum:
            self._wait(lambda: self._conn.execute("VACUUM"), "compacting the migrated store")

    # ---- writing -------------------------------------------------------------------------

    def put_many(self, items: Iterable[tuple[Judgment, Mapping[str, Any] | None]]) -> int:
        """Store judgments with their fingerprints in one transaction, releasing this process's
        leases on their keys; how many were written (module docstring)."""
        items = list(items)
        rows = self.stored_rows(items)
        with self._transaction():
            written = self._upsert_stored(rows)
            self._conn.executemany(INSERT_PAIR, (row.columns[:3] for row in rows))
            release_stored(self._conn, (judgment.key for judgment, _ in items))
        return written

    def _upsert_stored(self, rows: Sequence[StoredRow]) -> int:
        """Write rows (in the caller's transaction), each judge and prompt kept once in
        `judgment_sources`; how many rows were written."""
        sources: dict[str, int] = {}  # ids of this transaction (a rollback forgets new ones)
        conn = self._conn
        by_object: dict[int, tuple[Source, int]] = {}  # rows share a few Source objects
        params = []
        for columns, source, replaceable in rows:
            known = by_object.get(id(source))
            if known is None or known[0] is not source:
                known = by_object[id(source)] = (source, source_id(conn, source, sources))
            params.append((*columns[:3], known[1], *columns[3:], replaceable))
        return conn.executemany(UPSERT_JUDGMENT, params).rowcount

    def put_pairs(self, pairs: Iterable[tuple[str, str, str]]) -> None:
        """Record (key, query_id, doc_id): the id pair's texts give that content key. A pair
        whose key has no judgment yet is listed once one is stored (see `iter_pair_judgments`)."""
        rows = pairs if isinstance(pairs, Sequence) else list(pairs)
        blob = encode_keys([k for k, _, _ in rows])
        if blob is None:
            encoded: Iterable[tuple[bytes | str, str, str]] = (
                (encode_key(k), q, d) for k, q, d in rows
            )
        else:  # every key decoded in one go
            encoded = ((blob[i * 32 : i * 32 + 32], q, d) for i, (_, q, d) in enumerate(rows))
        with self._transaction():
            self._conn.executemany(INSERT_PAIR, encoded)

    def put_text_rows(self, queries: Iterable[tuple[str, str]], docs: Iterable[DocRow]) -> None:
        """Keep the texts (rows of `text_rows`) so the store alone can regrade them later."""
        with self._transaction():
            self._conn.executemany(UPSERT_QUERY, queries)
            self._conn.executemany(UPSERT_DOC, docs)

    def log_calls(self, records: Iterable[CallRecord]) -> None:
        """Append HTTP attempts to the call log. Secrets in the error message are masked."""
        rows = [self._call_row(r) for r in records]
        if not rows:
            return
        with self._transaction():
            self._conn.executemany(INSERT_CALL, rows)

    # ---- rows kept while the store is busy ------------------------------------------------

    def write_rows(self, rows: Rows) -> None:
        """Store rows from `rows()` in one transaction; writing them twice changes nothing."""
        with self._transaction("writing journaled answers"):
            self._upsert_stored([from_journal_row(row) for row in rows.judgments])
            self._conn.executemany(INSERT_PAIR, _pair_rows(rows.judgments))
            self._conn.executemany(INSERT_CALL_ONCE, rows.calls)
            release_stored(self._conn, (row[0] for row in rows.judgments))

    def write_stored_parts(
        self, parts: Sequence[Sequence[StoredRow]], *, pairs: bool = True
    ) -> list[int]:
        """Store parts of rows already made (an import's) in one transaction; how many of each
        part were written. `pairs=False`: their id pairs are listed already. Takes no lease."""
        with self._transaction("writing imported answers"):
            written = [self._upsert_stored(rows) for rows in parts]
            if pairs:
                for rows in parts:
                    self._conn.executemany(INSERT_PAIR, (r.columns[:3] for r in rows))
        return written

    def _identify(self, had_schema: bool) -> None:
        """Read (or give) the store's id and name its journals by it; a store made before
        ids (`had_schema`, no id yet) also replays the journals named as then."""
        found = stored_id(self._conn)
        if found is None:
            with self._transaction("giving the store its id"):
                found = give_id(self._conn, now_text())
            if had_schema:
                self.legacy = [Journal(self.path), *legacy_rescue_journals(self.path)]
        self.store_id = found
        self.journal = Journal(self.path, path=journal_path(self.path, found))
        self.rescues = rescue_journals(self.path, found)

    def journal_pending(self) -> bool:
        """Whether the journal beside the store, or a rescue journal, holds rows."""
        return any(j.pending() for j in [self.journal, *self.rescues, *self.legacy])

    def replay_journal(self) -> int:
        """Store every row of the journal beside the store (and of the rescue journals) and
        remove it; how many rows."""
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
