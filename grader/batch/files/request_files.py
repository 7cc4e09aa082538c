"""The request files of a batch export, written where the lines are rendered, on a thread of
their own.

`RequestFiles.add` decides where each line goes (the file and its place there) at once, on the
caller's thread, and gathers lines into blocks of about `BLOCK_BYTES`; a thread writes each
block (which releases the GIL: the caller keeps rendering meanwhile). A file is written under
a temporary name; once full, the thread flushes, fsyncs and closes it, and it becomes a
`WrittenFile`, which `take_written` hands to the export's recorder. The thread hashes each
block as it writes it (sha256, which releases the GIL too): the recorder, the slower side of a
large export, read each file back for it (3.2 s of its 38 at 1,000,000 lines). The recorder
records the file's lines, then publishes it: checks its size on disk, and renames it to its
final name, to be listed in the store with its sha256. A file the store lists always has its
lines recorded. Only the names of the files cross to the recorder, never their lines.

At most `QUEUE_BLOCKS` blocks wait for the thread: memory does not grow with the export. An
error on the thread is raised on the caller's next call. `abandon` stops the thread and gives
back the files written whole whose lines the recorder was handed (to be published: an
interrupted export keeps them), removing the others; `remove_temporaries` removes what is left
under this export's temporary names once nothing writes them.
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

from grader.errors import InputError

BLOCK_BYTES = 1 << 20
QUEUE_BLOCKS = 16


def check_size(size: int, max_bytes: int) -> None:
    """InputError when a line of `size` bytes cannot fit any file."""
    if size > max_bytes:
        raise InputError(
            f"a request is {size} bytes, over the {max_bytes}-byte file limit",
            hint="lower the prompt's document budget or raise --batch-max-bytes",
        )


def final_name(out_dir: Path, export_id: str, file_no: int) -> Path:
    """Where request file `file_no` of an export is published."""
    return out_dir / f"requests-{export_id}-{file_no:05d}.jsonl"


def temporary_name(final: Path) -> Path:
    """Where a request file is written until it is published."""
    return final.with_name(f".{final.name}.tmp")


def remove_temporaries(out_dir: Path, export_id: str) -> None:
    """Remove the files of an export still under their temporary names (an export stopped
    halfway); call it only once nothing writes them."""
    for path in out_dir.glob(f".requests-{export_id}-*.jsonl.tmp"):
        path.unlink(missing_ok=True)


@dataclass(frozen=True)
class WrittenFile:
    """A request file written whole under its temporary name (flushed and fsynced)."""

    file_no: int
    final: Path
    lines: int
    size: int
    through: int  # how many lines were placed, in all files, once its last one was
    digest: str  # the hex sha256 of the bytes written

    def sha256(self) -> str:
        """The hex sha256 of the file as written (hashed as it was written; its size on disk
        is checked: an OSError when the file changed since)."""
        path = temporary_name(self.final)
        size = path.stat().st_size
        if size != self.size:
            raise OSError(f"{path}: {size} bytes on disk, {self.size} written")
        return self.digest

    def publish(self) -> Path:
        """Rename the file to its final name; that name."""
        os.replace(temporary_name(self.final), self.final)
        return self.final


@dataclass
class _File:
    """One request file: its final and temporary names, and what the thread has written."""

    file_no: int
    final: Path
    tmp: Path
    handle: IO[bytes] | None = None
    lines: int = 0
    size: int = 0
    through: int = 0
    hashed: hashlib._Hash = field(default_factory=hashlib.sha256)  # what the thread wrote


_Task = Callable[[], None]


class RequestFiles:
    """Request files under a line and a byte limit (see the module docstring)."""

    def __init__(self, out_dir: Path, export_id: str, max_lines: int, max_bytes: int) -> None:
        self.out_dir = out_dir
        self.export_id = export_id
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self.placed = 0  # lines placed, in all files
        self._file: _File | None = None  # the file lines go to now
        self._file_no = 0
        self._lines = 0
        self._size = 0
        self._block: list[bytes] = []
        self._block_size = 0
        self._written: list[WrittenFile] = []  # appended by the thread, taken by the caller
        self._lock = threading.Lock()
        self._open: _File | None = None  # the file the thread has open
        self._error: BaseException | None = None
        self._queue: queue.Queue[_Task | None] = queue.Queue(QUEUE_BLOCKS)
        self._thread = threading.Thread(target=self._run, name="request-files", daemon=True)
        self._thread.start()

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
            final = final_name(self.out_dir, self.export_id, self._file_no)
            self._file = _File(self._file_no, final, temporary_name(final))
            self._lines = self._size = 0
        self._block.append(line)
        self._block_size += size
        self._lines += 1
        self._size += size
        self.placed += 1
        if self._block_size >= BLOCK_BYTES:
            self._hand_block()
        return self._file_no, self._lines

    def close(self) -> None:
        """Hand the current file over to be finished (flushed, fsynced, closed)."""
        if self._file is None:
            return
        self._hand_block()
        file, self._file = self._file, None
        file.through = self.placed

        def finish() -> None:
            handle = self._handle(file)
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
            file.handle = None
            done = WrittenFile(
                file.file_no,
                file.final,
                file.lines,
                file.size,
                file.through,
                file.hashed.hexdigest(),
            )
            with self._lock:
                self._written.append(done)

        self._put(finish)

    def take_written(self) -> list[WrittenFile]:
        """The files finished since the last call, in order (raises the thread's error)."""
        self._raise()
        return self._take()

    def wait(self) -> None:
        """Wait until every file handed over is finished (raises the thread's error)."""
        self._queue.put(None)
        self._thread.join()
        self._raise()

    def abandon(self, handed: int = 0) -> list[WrittenFile]:
        """Stop: the thread ends (the open file is removed). The files written whole and not
        taken whose lines are all among the first `handed` placed (the lines the recorder has)
        are given back, to be published; the others are removed."""
        self._file = None
        self._block, self._block_size = [], 0
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        kept = []
        for written in self._take():
            if written.through <= handed:
                kept.append(written)
            else:
                temporary_name(written.final).unlink(missing_ok=True)
        return kept

    def _take(self) -> list[WrittenFile]:
        with self._lock:
            taken, self._written = self._written, []
        return taken

    # ---- the thread ----------------------------------------------------------------------

    def _hand_block(self) -> None:
        if not self._block or self._file is None:
            return
        data, count, file = b"".join(self._block), len(self._block), self._file
        self._block, self._block_size = [], 0

        def write() -> None:
            self._handle(file).write(data)
            file.hashed.update(data)
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
        try:
            while (task := self._queue.get()) is not None:
                task()
        except BaseException as exc:  # raised on the caller's thread
            self._error = exc
            while self._queue.get() is not None:  # let the caller's puts through
                pass
        finally:
            self._remove_open()

    def _remove_open(self) -> None:
        file, self._open = self._open, None
        if file is None or file.handle is None:
            return
        file.handle.close()
        file.tmp.unlink(missing_ok=True)
