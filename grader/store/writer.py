"""Batched writes of judgments and call records, for the grading pipeline. A busy store is waited
for (answers journaled after `journal_after_s`; a `durable` writer journals each as queued); a full
disk sends them to a journal or rescue journal and stops the run. The next open replays them."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.models import CallRecord, Judgment
from grader.store import busy
from grader.store.store import Store

FLUSH_SIZE = 64

Item = tuple[Judgment, Mapping[str, Any] | None]


@dataclass
class _Held:
    judgments: list[Item] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.judgments or self.calls)

    def extend(self, other: _Held) -> None:
        self.judgments.extend(other.judgments)
        self.calls.extend(other.calls)


class StoreWriter:
    """Commits judgments and call records in small batches; thread-safe, one flush at a time."""

    def __init__(self, store: Store | None, *, durable: bool = False) -> None:
        self.store = store
        self.durable = durable and store is not None
        self.journal_after_s = busy.seconds_from_env(
            "RELGRADE_STORE_BUSY_JOURNAL_AFTER", busy.JOURNAL_AFTER_S
        )
        self._queue = _Held()
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self._background: asyncio.Future[None] | None = None  # the flush queued on a thread
        self.full: busy.StoreFullError | None = None  # the store's disk was found full
        self.kept: dict[Path, int] = {}  # judgments in each journal while the disk is full
        self._unsaved = _Held()  # what no journal took either (the disk is full)

    def add_group(self, items: Iterable[Item]) -> None:
        """Queue judgments that must be committed together (an answer and the output judgments
        it completed): one flush takes them all. A durable writer journals them first."""
        items = list(items)
        if self.durable:  # unsynced; no journal with room: they wait for the flush as they are
            assert self.store is not None
            self._journal(self.store, _Held(items), sync=False)
        with self._lock:
            self._queue.judgments.extend(items)
            full = len(self._queue.judgments) >= FLUSH_SIZE
        if full:
            self._flush_soon()

    def _flush_soon(self) -> None:
        """Flush now: on a worker thread when called from an event loop (a busy store must not
        freeze it), else here. Skipped while a flush runs or waits to (it takes these too)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        if self._background is not None or self._flushing.locked():
            return
        self._background = loop.run_in_executor(None, self.flush)
        # Its error, if any, is met again by the next flush (the items went back to the queue).
        self._background.add_done_callback(self._flushed)

    def _flushed(self, future: asyncio.Future[None]) -> None:
        self._background = None
        if not future.cancelled():
            future.exception()  # retrieved: the next flush meets the error again and raises it

    def log_call(self, record: CallRecord) -> None:
        """Queue one HTTP attempt for the call log (the judge's `on_call`)."""
        with self._lock:
            self._queue.calls.append(record)

    def flush(self) -> None:
        """Commit everything queued and any journaled rows, waiting while the store is busy; blocks
        (call it off the event loop). On another error the items go back and it raises."""
        with self._flushing:
            held = self._take()
            held.extend(self._unsaved)  # tried again: room may have been made
            self._unsaved = _Held()
            store = self.store
            if store is None or not (held or store.journal_pending()):
                return
            wait: busy.BusyWait | None = None
            journaled = 0
            while True:
                try:
                    with store.no_wait():
                        self._write(store, held)
                    if self.full is not None and not self._unsaved:
                        self.kept = {}  # room again: the journals were stored (`_write`)
                    break
                except busy.StoreFullError as exc:
                    self._keep(store, held, exc)
                    break
                except busy.StoreBusyError:
                    if wait is None:
                        wait = busy.BusyWait(store.path, "writing answers", store.on_busy)
                    held.extend(self._take())
                    due = bool(held) and wait.waited_s >= self.journal_after_s
                    if due and self._journal(store, held) is not None:  # (else: still held)
                        journaled += len(held.judgments)
                        held = _Held()
                        wait.tell(journaled=journaled, journal=store.journal.path)
                    wait.failed(
                        held=len(held.judgments), journaled=journaled, journal=store.journal.path
                    )
                except KeyboardInterrupt:
                    # Still busy: keep them safe before leaving (else in the queue).
                    if not (wait is not None and held and self._journal(store, held)):
                        self._put_back(held)
                    raise
                except BaseException:
                    self._put_back(held)
                    raise
            if wait is not None:
                wait.done(journaled=journaled, journal=store.journal.path)

    def _take(self) -> _Held:
        with self._lock:
            held, self._queue = self._queue, _Held()
        return held

    def _put_back(self, held: _Held) -> None:
        with self._lock:
            self._queue.judgments[:0] = held.judgments
            self._queue.calls[:0] = held.calls

    def _write(self, store: Store, held: _Held) -> None:
        """One attempt; what is committed leaves `held`, so a retry never repeats it."""
        if held:
            store.put_many(held.judgments, held.calls)
            held.judgments, held.calls = [], []
        if store.journal_pending():
            store.replay_journal()

    def _keep(self, store: Store, held: _Held, exc: busy.StoreFullError) -> None:
        """The store's disk is full: keep `held` in the first journal with room, else in memory."""
        self.full = exc
        if not held:
            return
        path = self._journal(store, held)
        if path is None:
            self._unsaved.extend(held)
        else:
            self.kept[path] = self.kept.get(path, 0) + len(held.judgments)

    def full_error(self) -> busy.StoreFullError | None:
        """The error telling where the answers a full disk left are (after the last flush)."""
        if self.full is None:
            return None
        kept = "; ".join(f"{n:,} in {path}" for path, n in self.kept.items() if n)
        text = str(self.full)
        if kept:
            text += (
                f". Paid answers not stored are kept: {kept}; the next run on this store "
                "stores them first, so none is paid again"
            )
        lost = len(self._unsaved.judgments)
        if lost:
            tried = ", ".join(str(j.path) for j in self.store.rescues) if self.store else ""
            text += (
                f". {lost:,} paid answers could not be written anywhere (the journal beside "
                f"the store and {tried} are on full or unwritable file systems)"
            )
        return busy.StoreFullError(text)

    def unsaved(self) -> list[Judgment]:
        """The judgments no store or journal took (the disk is full: `full_error`)."""
        return [judgment for judgment, _ in self._unsaved.judgments]

    def unsaved_rows(self) -> list[tuple[Any, ...]]:
        """The store rows of `unsaved()`, in the same order (what a journal would hold)."""
        if self.store is None or not self._unsaved.judgments:
            return []
        return self.store.rows(self._unsaved.judgments).judgments

    def _journal(self, store: Store, held: _Held, *, sync: bool = True) -> Path | None:
        """Append `held` to the first journal with room: the one beside the store, then the
        rescue journals (`grader.store.journal`); which, or None when none took them."""
        rows = store.rows(held.judgments, held.calls)
        for journal in [store.journal, *store.rescues]:
            try:
                journal.append(rows, sync=sync)
            except OSError:  # full too (or not writable): the next one
                continue
            return journal.path
        return None
