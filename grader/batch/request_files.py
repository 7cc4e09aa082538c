"""The request files of a batch export, written on a thread of their own.

`RequestFiles.add` decides where each line goes (the file and its place there) at once, on the
caller's thread, and gathers lines into blocks of about `BLOCK_BYTES`; a thread writes each
block and feeds it to the file's sha256 (both release the GIL on blocks that size, so the
caller keeps rendering meanwhile). A file is written to a temporary name; once full, the thread
flushes, fsyncs and renames it, then records it in the store (`ExportState.add_file`, through its
own connection). The caller records the file's lines (`before_close`) before it hands the file
over to be finished, so a file the store lists always has its lines recorded.

At most `QUEUE_BLOCKS` blocks wait for the thread: memory does not grow with the export. An
error on the thread is raised on the caller's next call; `abandon` finishes the files already
handed over and removes the one still open, as an interrupted export leaves it.
"""

from __future__ import annotations

import hashlib
import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from grader.batch.exports import ExportState
from grader.errors import InputError
from grader.store.store import Store

BLOCK_BYTES = 1 << 20
QUEUE_BLOCKS = 16


def check_size(size: int, max_bytes: int) -> None:
    """InputError when a line of `size` bytes cannot fit any file."""
    if size > max_bytes:
        raise InputError(
            f"a request is {size} bytes, over the {max_bytes}-byte file limit",
            hint="lower the prompt's document budget or raise --batch-max-bytes",
        )


@dataclass
class _File:
    """One request file: its final and temporary names, and what the thread has written."""

    file_no: int
    final: Path
    tmp: Path
    handle: IO[bytes] | None = None
    sha256: hashlib._Hash = field(default_factory=hashlib.sha256)
    lines: int = 0
    size: int = 0
    done: bool = False


_Task = Callable[[ExportState], None]


class RequestFiles:
    """Request files under a line and a byte limit (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        out_dir: Path,
        export_id: str,
        max_lines: int,
        max_bytes: int,
        before_close: Callable[[], None],
    ) -> None:
        self.before_close = before_close  # records the file's lines before the file itself
        self.out_dir = out_dir
        self.export_id = export_id
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self.files: list[Path] = []  # finished files, in order (appended by the thread)
        self._store = store
        self._file: _File | None = None  # the file lines go to now
        self._file_no = 0
        self._lines = 0
        self._size = 0
        self._block: list[bytes] = []
        self._block_size = 0
        self._open: _File | None = None  # the thread's file not yet finished
        self._error: BaseException | None = None
        self._queue: queue.Queue[_Task | None] = queue.Queue(QUEUE_BLOCKS)
        self._thread = threading.Thread(target=self._run, name="request-files", daemon=True)
        self._thread.start()

    def name(self, file_no: int) -> Path:
        return self.out_dir / f"requests-{self.export_id}-{file_no:05d}.jsonl"

    def add(self, line: bytes) -> tuple[int, int]:
        """Place one line; returns the number of the file it goes into and its place there."""
        size = len(line)
        check_size(size, self.max_bytes)
        if self._file is not None and (
            self._lines >= self.max_lines or self._size + size > self.max_bytes
        ):
            self.close()
        if self._file is None:
            self._file_no += 1
            final = self.name(self._file_no)
            self._file = _File(self._file_no, final, final.with_name(f".{final.name}.tmp"))
            self._lines = self._size = 0
        self._block.append(line)
        self._block_size += size
        self._lines += 1
        self._size += size
        if self._block_size >= BLOCK_BYTES:
            self._hand_block()
        return self._file_no, self._lines

    def close(self) -> None:
        """Record the current file's lines (`before_close`), then have it finished."""
        if self._file is None:
            return
        self.before_close()
        self._hand_block()
        file, export_id = self._file, self.export_id
        self._file = None

        def finish(state: ExportState) -> None:
            handle = self._handle(file)
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
            file.handle = None
            os.replace(file.tmp, file.final)
            file.done = True
            self._open = None
            state.add_file(
                export_id,
                file.file_no,
                str(file.final.resolve()),
                file.lines,
                file.size,
                file.sha256.hexdigest(),
            )
            self.files.append(file.final)

        self._put(finish)

    def wait(self) -> None:
        """Wait until every file handed over is finished (raises the thread's error)."""
        self._queue.put(None)
        self._thread.join()
        self._raise()

    def abandon(self) -> None:
        """Stop: files handed over are finished, the one still open is removed."""
        self._file = None
        self._block, self._block_size = [], 0
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()

    # ---- the thread ----------------------------------------------------------------------

    def _hand_block(self) -> None:
        if not self._block or self._file is None:
            return
        data, count, file = b"".join(self._block), len(self._block), self._file
        self._block, self._block_size = [], 0

        def write(_: ExportState) -> None:
            self._handle(file).write(data)
            file.sha256.update(data)
            file.lines += count
            file.size += len(data)

        self._put(write)

    def _handle(self, file: _File) -> IO[bytes]:
        if file.handle is None:
            file.handle = file.tmp.open("wb")
            self._open = file
        return file.handle

    def _put(self, task: _Task) -> None:
        self._raise()
        self._queue.put(task)

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        state: ExportState | None = None
        try:
            state = ExportState(self._store)
            while (task := self._queue.get()) is not None:
                task(state)
        except BaseException as exc:  # raised on the caller's thread
            self._error = exc
            while self._queue.get() is not None:  # let the caller's puts through
                pass
        finally:
            self._remove_open()
            if state is not None:
                state.close()

    def _remove_open(self) -> None:
        file, self._open = self._open, None
        if file is None or file.done:
            return
        if file.handle is not None:
            file.handle.close()
        file.tmp.unlink(missing_ok=True)
