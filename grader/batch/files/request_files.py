"""The request files of a batch export, split under a line and a byte limit, written in blocks
and hashed as written. A file is written locked under a temporary name, fsynced, then published
(renamed) in the transaction that lists it with its lines; the next export into the folder
removes what a killed one left (`drop_stale`), never a live one's file. Their lines are built
fast (`RequestLines`), byte for byte what `request_line` gives."""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from json.encoder import encode_basestring
from pathlib import Path
from typing import IO

from grader.batch.adapter import LLMBatchJudge
from grader.batch.requests import check_size, request_line
from grader.keys import json_string
from grader.models import Doc, Query
from grader.prompts import MessageRenderer

try:
    import fcntl
except ImportError:  # (Windows)
    fcntl = None  # type: ignore[assignment]

BLOCK_BYTES = 1 << 20
CHECK_EVERY = 1000  # request lines built the fast way, one of this many also built the slow way


def temporary_name(final: Path) -> Path:
    """Where a request file is written until it is published."""
    return final.with_name(f".{final.name}.tmp")


def remove_temporaries(out_dir: Path, export_id: str) -> None:
    """Remove the files of an export still under their temporary names."""
    for path in out_dir.glob(f".requests-{export_id}-*.jsonl.tmp"):
        path.unlink(missing_ok=True)


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
            final = self.out_dir / f"requests-{self.export_id}-{self._file_no:05d}.jsonl"
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
        """Open a file to write at `path`, locked before it has that name (an exclusive
        `flock`, which ends with the process: another export tells a live one's file from a
        killed one's)."""
        if fcntl is None:
            return path.open("wb")
        staging = path.with_name(path.name + ".new")
        handle = staging.open("wb")
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
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


class RequestLines:
    """The request lines of one judge (in its batch output mode): a frame serialized once with
    marks, cut at them, each pair's strings JSON-encoded into it. Every `CHECK_EVERY`-th line is
    also built the slow way; should they differ, the slow way is used from then on."""

    def __init__(self, judge: LLMBatchJudge) -> None:
        self.judge = judge
        live = judge.live
        self.renderer = MessageRenderer(live.prompt, judge.mode)
        probe, _ = self.renderer.messages(Query(query_id="q", text="q"), Doc(doc_id="d", text="d"))
        token = secrets.token_hex(8)
        marks = [f"@relgrade-mark-{i}-{token}@" for i in range(len(probe) + 1)]
        messages = [{**m, "content": marks[i + 1]} for i, m in enumerate(probe)]
        body = live.server.body(live.prompt, live.model, messages, judge.mode)
        text = request_line(marks[0], body).decode("utf-8")
        pieces: list[str] = []
        self._exact = True  # False: the frame could not be cut, or a line differed
        for mark in marks:
            quoted = encode_basestring(mark)
            before, found, text = text.partition(quoted)
            self._exact = self._exact and bool(found) and quoted not in text
            pieces.append(before)
        pieces.append(text)
        self._pieces = tuple(p.encode("utf-8") for p in pieces)
        self._exact = self._exact and len(probe) == 2  # `contents` gives system and user
        self._count = 0
        self._last_system: str | None = None
        self._last_encoded = b""
        self.slow_lines = 0  # lines built the slow way (none while the frame holds)

    def line(self, custom_id: str, query: Query, doc: Doc) -> bytes:
        """The request line (UTF-8, newline included) of one pair under `custom_id`."""
        self._count += 1
        if not self._exact:
            return self._slow(custom_id, query, doc)
        system, user, _ = self.renderer.contents(query, doc)
        if system is not self._last_system:
            self._last_system, self._last_encoded = system, json_string(system)
        pieces = self._pieces
        parts = [
            pieces[0],
            json_string(custom_id),
            pieces[1],
            self._last_encoded,
            pieces[2],
            json_string(user),
            pieces[3],
        ]
        line = b"".join(parts)
        if self._count % CHECK_EVERY == 1:
            exact = request_line(custom_id, self.judge.build_request(query, doc))
            if line != exact:
                self._exact = False
                self.slow_lines += 1
                return exact
        return line

    def _slow(self, custom_id: str, query: Query, doc: Doc) -> bytes:
        self.slow_lines += 1
        return request_line(custom_id, self.judge.build_request(query, doc))
