"""The request files of a batch export, split under a line and a byte limit, written in blocks
and hashed as written. A file is written locked under a temporary name, fsynced, then published
(renamed) in the transaction that lists it with its lines; the next export into the folder
removes what a killed one left (`drop_stale`), never a live one's file."""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from grader.batch.requests import check_size

try:
    import fcntl
except ImportError:  # (Windows)
    fcntl = None  # type: ignore[assignment]

BLOCK_BYTES = 1 << 20


def final_name(out_dir: Path, export_id: str, file_no: int) -> Path:
    """Where request file `file_no` of an export is published."""
    return out_dir / f"requests-{export_id}-{file_no:05d}.jsonl"


def temporary_name(final: Path) -> Path:
    """Where a request file is written until it is published."""
    return final.with_name(f".{final.name}.tmp")


def remove_temporaries(out_dir: Path, export_id: str) -> None:
    """Remove the files of an export still under their temporary names."""
    for path in out_dir.glob(f".requests-{export_id}-*.jsonl.tmp"):
        path.unlink(missing_ok=True)


def hold(handle: IO[bytes]) -> None:
    """Lock a request file being written (an exclusive `flock`, which ends with the process),
    so another export tells a live one's file from a killed one's (no `flock`: nothing)."""
    if fcntl is not None:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)


def drop_stale(out_dir: Path, unlisted: Callable[[str, int], bool]) -> int:
    """Remove what a killed export left in `out_dir` (files under a temporary name, and
    published files `unlisted(export_id, file_no)`), but files a live export holds locked;
    how many."""
    if fcntl is None:
        return 0
    dropped = 0
    for path in out_dir.glob("*requests-*-*.jsonl*"):
        name = path.name
        if name.startswith(".") and name.endswith(".jsonl.tmp"):
            pass
        elif name.startswith("requests-") and name.endswith(".jsonl"):
            parts = name[len("requests-") : -len(".jsonl")].rsplit("-", 1)
            if len(parts) != 2 or not parts[1].isdigit() or not unlisted(parts[0], int(parts[1])):
                continue
        else:
            continue
        dropped += _drop_unheld(path)
    return dropped


def _drop_unheld(path: Path) -> int:
    """Remove `path` unless a process holds its lock; 1 when removed."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # gone meanwhile (published, or removed)
        return 0
    try:
        assert fcntl is not None
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        path.unlink(missing_ok=True)
        return 1
    except OSError:  # locked: a live export writes it
        return 0
    finally:
        os.close(fd)


@dataclass(frozen=True)
class WrittenFile:
    """A request file written whole under its temporary name (flushed and fsynced)."""

    file_no: int
    final: Path
    lines: int
    size: int
    digest: str  # the hex sha256 of the bytes written
    lock: int | None = None  # a descriptor holding the file's lock until `release`

    def sha256(self) -> str:
        """The hex sha256 of the file as written (OSError when its size on disk changed)."""
        path = temporary_name(self.final)
        size = path.stat().st_size
        if size != self.size:
            raise OSError(f"{path}: {size} bytes on disk, {self.size} written")
        return self.digest

    def publish(self) -> Path:
        os.replace(temporary_name(self.final), self.final)
        return self.final

    def release(self) -> None:
        """Let go of the file's lock (its listing committed, or given up)."""
        if self.lock is not None:
            os.close(self.lock)
            object.__setattr__(self, "lock", None)


@dataclass
class _File:
    """The file lines go to now."""

    file_no: int
    final: Path
    handle: IO[bytes]
    lines: int = 0
    size: int = 0
    hashed: hashlib._Hash = field(default_factory=hashlib.sha256)


class RequestFiles:
    """Request files under a line and a byte limit (see the module docstring)."""

    def __init__(self, out_dir: Path, export_id: str, max_lines: int, max_bytes: int) -> None:
        self.out_dir = out_dir
        self.export_id = export_id
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self.written: list[WrittenFile] = []  # closed, not yet taken
        self._file: _File | None = None
        self._file_no = 0
        self._block: list[bytes] = []
        self._block_size = 0

    def add(self, line: bytes) -> tuple[int, int]:
        """Place one line; returns the number of the file it goes into and its place there."""
        size = len(line)
        check_size(size, self.max_bytes)
        file = self._file
        if file is not None and (file.lines >= self.max_lines or file.size + size > self.max_bytes):
            self.close()
            file = None
        if file is None:
            self._file_no += 1
            final = final_name(self.out_dir, self.export_id, self._file_no)
            file = self._file = _File(self._file_no, final, self._open(temporary_name(final)))
        self._block.append(line)
        self._block_size += size
        file.lines += 1
        file.size += size
        if self._block_size >= BLOCK_BYTES:
            self._write_block(file)
        return file.file_no, file.lines

    def close(self) -> None:
        """Finish the file being written (flushed, fsynced, closed): one more `written`."""
        file, self._file = self._file, None
        if file is None:
            return
        self._write_block(file)
        file.handle.flush()
        os.fsync(file.handle.fileno())
        lock = os.dup(file.handle.fileno())  # the lock stands while this descriptor is open
        file.handle.close()
        digest = file.hashed.hexdigest()
        self.written.append(
            WrittenFile(file.file_no, file.final, file.lines, file.size, digest, lock)
        )

    def take_written(self) -> list[WrittenFile]:
        """The files finished since the last call, in order."""
        taken, self.written = self.written, []
        return taken

    def abandon(self) -> None:
        """Stop: the file being written is closed and removed."""
        file, self._file = self._file, None
        self._block, self._block_size = [], 0
        if file is not None:
            with contextlib.suppress(OSError):  # a full disk fails the last flush again
                file.handle.close()
            temporary_name(file.final).unlink(missing_ok=True)

    def _open(self, path: Path) -> IO[bytes]:
        """Open a file to write at `path`, locked before it has that name."""
        if fcntl is None:
            return path.open("wb")
        staging = path.with_name(path.name + ".new")
        handle = staging.open("wb")
        try:
            hold(handle)
            os.replace(staging, path)  # (the lock goes with the file)
        except BaseException:
            handle.close()
            staging.unlink(missing_ok=True)
            raise
        return handle

    def _write_block(self, file: _File) -> None:
        data = b"".join(self._block)
        self._block, self._block_size = [], 0
        file.handle.write(data)
        file.hashed.update(data)
