"""A batch export's recording (`grader.batch.files.export_recorder`) in a child process of its
own, so the store's inserts run on one core while the export renders the next lines and writes the
request files on another.

The child is forked (it starts at once, with the modules and the judge already loaded; where
fork is not offered, `available()` is False and the export records in its own process). It opens
its own connections to the store, takes chunks from a pipe in the order they were sent and
records them exactly as the in-process recorder does, so the rows are the same ones. A chunk
holds rows and the names of files written, not the lines' bytes (the lines are ~2.8 KB each;
the exporting process writes them itself). A thread of the child reads the pipe into a queue of
at most `QUEUE_CHUNKS` chunks (~2 MB each): the sender blocks when the child is that far behind,
so memory stays flat. The queue holds what the export renders while the child writes a batch to
the store, so the export does not stop at each batch. The child tells how far the store is
(`recorded`), and sends back an error it met (raised by the sender's next call). Its connections
keep 32 MiB of pages each and space checkpoints (`grader.store.wal`): each batch inserts random
keys into indexes that outgrow SQLite's default 2 MiB cache, whose pages would otherwise be
read in again at every batch.

The child ignores Ctrl-C: the export stops it by closing the pipe (an interrupted export, or an
error) once it has stopped writing files, and the child then abandons as the in-process
recorder does (files not published are removed); a parent killed outright closes the pipe too.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import queue
import signal
import threading
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from grader.batch.files.export_recorder import Chunk, ExportRecorder
from grader.batch.files.exports import ExportState
from grader.batch.files.request_files import remove_temporaries
from grader.errors import StoreError
from grader.store.store import Store
from grader.store.wal import BULK_PAGES

QUEUE_CHUNKS = 48  # the export renders on while the child writes a batch (~100 MB at most)
CACHE_KIB = 32_768  # SQLite pages each of the child's connections keeps (2 MiB by default)
STOP_WAIT_S = 120.0  # how long an abandoned child may take to finish the files handed over


def available() -> bool:
    """Whether this platform can fork the recording process."""
    return "fork" in multiprocessing.get_all_start_methods()


class BackgroundRecorder:
    """`ExportRecorder`'s `add`, `finish`, `abandon` and `recorded`, run in a child process."""

    def __init__(
        self,
        store: Store,
        out_dir: Path,
        export_id: str,
        batch_pairs: int,
    ) -> None:
        context = multiprocessing.get_context("fork")
        inbox, self._send = context.Pipe(duplex=False)
        self._recv, outbox = context.Pipe(duplex=False)
        settings = (store.path, out_dir, export_id, batch_pairs)
        self._process = context.Process(
            target=_child,
            args=(settings, inbox, outbox, (self._send, self._recv)),
            name="relgrade-export-recorder",
            daemon=True,
        )
        self._process.start()
        inbox.close()
        outbox.close()
        self.recorded = 0
        self._files: list[Path] | None = None

    def add(self, chunk: Chunk) -> None:
        self._read(block=False)
        self._hand(chunk)

    def finish(self) -> list[Path]:
        self._hand(None)
        while self._files is None:
            self._read(block=True)
        self._process.join()
        return self._files

    def abandon(self) -> None:
        self._send.close()  # the child sees the end of the pipe: it abandons
        self._process.join(STOP_WAIT_S)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._recv.close()

    def _hand(self, item: Chunk | None) -> None:
        try:
            self._send.send(item)
        except OSError:  # the child is gone: its error, or that it ended
            self._read(block=True)
            raise

    def _read(self, *, block: bool) -> None:
        """Take the child's messages (all waiting, or at least one when `block`)."""
        while block or self._recv.poll():
            block = False
            try:
                kind, value = self._recv.recv()
            except (EOFError, OSError):
                self._process.join(1.0)
                raise StoreError(
                    "the export's recording process ended unexpectedly"
                    f" (exit code {self._process.exitcode})"
                ) from None
            if kind == "recorded":
                self.recorded = value
            elif kind == "done":
                self._files = value
            else:
                raise value


def _child(
    settings: tuple[Path, Path, str, int],
    inbox: Connection,
    outbox: Connection,
    parent_ends: tuple[Connection, Connection],
) -> None:
    """The child process: record the chunks read from `inbox` (see the module docstring)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for conn in parent_ends:  # or the pipe would never end while the child holds its far side
        conn.close()
    gc.freeze()  # what the fork copied stays untouched by the collector (and unshared)
    items: queue.Queue[Any] = queue.Queue(QUEUE_CHUNKS)
    reader = threading.Thread(target=_read_pipe, args=(inbox, items), daemon=True)
    reader.start()
    path, out_dir, export_id, batch_pairs = settings
    ended = False  # the end or the abandon was taken from the queue
    try:
        with (
            Store(path) as store,
            ExportState(store) as state,
            store.checkpoint_every(BULK_PAGES),
            state.checkpoint_every(BULK_PAGES),
        ):
            store.set_cache(CACHE_KIB)
            state.set_cache(CACHE_KIB)
            recorder = ExportRecorder(store, state, out_dir, export_id, batch_pairs)
            recorded = 0
            while isinstance(item := items.get(), Chunk):
                recorder.add(item)
                if recorder.recorded != recorded:
                    recorded = recorder.recorded
                    outbox.send(("recorded", recorded))
            ended = True
            if item is None:
                outbox.send(("done", recorder.finish()))
            else:
                recorder.abandon()
    except BaseException as exc:
        _send_error(outbox, exc)
        while not ended:  # keep the sender from blocking until it stops
            ended = not isinstance(items.get(), Chunk)
        remove_temporaries(out_dir, export_id)  # the sender has stopped writing files


def _read_pipe(inbox: Connection, items: queue.Queue[Any]) -> None:
    """Chunks from the pipe into the queue, then None (the export's end) or `_ABANDON`."""
    while True:
        try:
            item = inbox.recv()
        except (EOFError, OSError):
            items.put(_ABANDON)
            return
        items.put(item)
        if item is None:
            return


_ABANDON = "abandon"


def _send_error(outbox: Connection, exc: BaseException) -> None:
    try:
        outbox.send(("error", exc))
    except OSError:  # the parent is gone
        return
    except Exception:  # an exception that cannot be pickled: its text
        with contextlib.suppress(OSError):
            outbox.send(("error", StoreError(f"export recording failed: {exc!r}")))
