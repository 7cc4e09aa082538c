"""The request files of a batch export, split under a line and a byte limit.

`RequestFiles.add` decides where each line goes (the file and its place there) and gathers lines
into blocks of about `BLOCK_BYTES`, each written and hashed (sha256) at once. A file is written
under a temporary name; once full it is flushed, fsynced and closed, and becomes a
`WrittenFile`, which the export publishes once all its lines are recorded: its size on disk is
checked, and it is renamed to its final name, to be listed in the store with its sha256. A file
the store lists always has its lines recorded. `abandon` removes the file being written;
`remove_temporaries` removes whatever is left under an export's temporary names.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from grader.errors import InputError

BLOCK_BYTES = 1 << 20


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
    halfway)."""
    for path in out_dir.glob(f".requests-{export_id}-*.jsonl.tmp"):
        path.unlink(missing_ok=True)


@dataclass(frozen=True)
class WrittenFile:
    """A request file written whole under its temporary name (flushed and fsynced)."""

    file_no: int
    final: Path
    lines: int
    size: int
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
    """The file lines go to now: its names, handle, what was placed in it, and its hash."""

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
        file.handle.close()
        digest = file.hashed.hexdigest()
        self.written.append(WrittenFile(file.file_no, file.final, file.lines, file.size, digest))

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
        return path.open("wb")

    def _write_block(self, file: _File) -> None:
        data = b"".join(self._block)
        self._block, self._block_size = [], 0
        file.handle.write(data)
        file.hashed.update(data)
