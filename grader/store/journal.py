"""An append-only journal beside the store for answers not stored yet.

Named by the store's id, replayed idempotently, shared between processes under a `flock`; when the
disk is full, rescue journals go to another file system (`rescue_journals`).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.errors import StoreError

Row = tuple[Any, ...]


@dataclass
class Rows:
    """Rows for the store's tables, ready to insert: judgments (with their id pairs) and calls."""

    judgments: list[Row] = field(default_factory=list)
    calls: list[Row] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.judgments) + len(self.calls)

    def extend(self, other: Rows) -> None:
        """Append `other`'s rows to these."""
        self.judgments.extend(other.judgments)
        self.calls.extend(other.calls)


def journal_path(store_path: Path, store_id: str | None = None) -> Path:
    """Where the journal of the store at `store_path` lives: named by its id (`store_id`, else
    read from the store), or as before ids when the store has none."""
    if store_id is None:
        from grader.store.identity import read_store_id

        store_id = read_store_id(store_path)
    if store_id is None:
        return legacy_journal_path(store_path)
    return store_path.with_name(f"relgrade-journal-{store_id}.jsonl")


def legacy_journal_path(store_path: Path) -> Path:
    """The journal's name before stores had ids: by the store's file name."""
    return store_path.with_name(store_path.name + ".journal.jsonl")


def rescue_dirs() -> list[Path]:
    """The folders of rescue journals, in the order they are tried (module docstring)."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    return [
        Path(state) / "relgrade" / "journals",
        Path(tempfile.gettempdir()) / "relgrade-journals",
    ]


def rescue_journals(store_path: Path, store_id: str | None = None) -> list[Journal]:
    """The rescue journals of the store at `store_path` (module docstring), named by its id
    (`store_id`, else read from the store; as before ids when it has none)."""
    if store_id is None:
        from grader.store.identity import read_store_id

        store_id = read_store_id(store_path)
    if store_id is None:
        return legacy_rescue_journals(store_path)
    name = f"relgrade-journal-{store_id}.jsonl"
    return [Journal(store_path, path=folder / name) for folder in rescue_dirs()]


def legacy_rescue_journals(store_path: Path) -> list[Journal]:
    """The rescue journals' names before stores had ids: by the store's resolved path."""
    resolved = str(Path(os.path.abspath(store_path)).resolve())
    digest = hashlib.sha256(resolved.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    name = f"{Path(resolved).name}-{digest}.journal.jsonl"
    return [Journal(store_path, path=folder / name) for folder in rescue_dirs()]


class Journal:
    """The journal of one store (module docstring); `path`: a rescue journal's."""

    def __init__(self, store_path: Path, *, path: Path | None = None) -> None:
        self.path = legacy_journal_path(store_path) if path is None else path

    def pending(self) -> bool:
        """Whether the journal holds rows (a cheap check, no lock)."""
        try:
            return self.path.stat().st_size > 0
        except OSError:  # none (or its folder cannot be: a rescue journal's)
            return False

    def append(self, rows: Rows, *, sync: bool = True) -> None:
        """Append `rows` and fsync them (and the folder, when the file is new); without `sync`
        they are written to the OS only (safe from a kill, not from a power cut)."""
        lines = [json.dumps({"judgment": list(r)}) + "\n" for r in rows.judgments]
        lines += [json.dumps({"call": list(r)}) + "\n" for r in rows.calls]
        if not lines:
            return
        data = "".join(lines).encode()
        if not self.path.parent.is_dir():
            self.path.parent.mkdir(parents=True, exist_ok=True)  # (a rescue journal's folder)
        with self._locked(create=True) as fd:
            assert fd is not None
            size = os.fstat(fd).st_size
            if size:
                # A line cut short by a killed appender (we hold the lock, so it is dead): drop it.
                size = _complete_length(fd, size)
                os.ftruncate(fd, size)
            os.lseek(fd, 0, os.SEEK_END)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if sync:
                    os.fsync(fd)
                    if not size:
                        _fsync_dir(self.path.parent)
            except OSError:
                # All or nothing (a full disk took part of it): the caller keeps the rows.
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, size)
                raise

    def drain(self, write: Callable[[Rows], object]) -> int:
        """Give every journaled row to `write` (one transaction), then remove the journal; how many
        rows. If `write` raises, the journal stays."""
        with self._locked(create=False) as fd:
            if fd is None:
                return 0
            rows = self._read(fd)
            if len(rows):
                write(rows)
            self.path.unlink()
            _fsync_dir(self.path.parent)
            return len(rows)

    def _read(self, fd: int) -> Rows:
        os.lseek(fd, 0, os.SEEK_SET)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        lines = b"".join(chunks).split(b"\n")
        rows = Rows()
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                if "judgment" in entry:
                    rows.judgments.append(tuple(entry["judgment"]))
                else:
                    call = tuple(entry["call"])
                    rows.calls.append(call if len(call) >= 12 else (*call, None))  # (no mode)
            except (ValueError, TypeError, KeyError) as exc:
                if number == len(lines):  # a line cut short by a killed process: never fsync'd
                    continue
                raise StoreError(
                    f"{self.path}, line {number}: not a journal line ({exc}); move the file "
                    "aside to open the store (its rows are answers not yet stored)"
                ) from None
        return rows

    @contextlib.contextmanager
    def _locked(self, *, create: bool) -> Iterator[int | None]:
        """An exclusive lock on the journal file (None when it does not exist and `create` is
        false). Retries when the drainer unlinked the file between our open and our lock."""
        flags = os.O_RDWR | (os.O_CREAT if create else 0)
        while True:
            try:
                fd = os.open(self.path, flags, 0o600)
            except FileNotFoundError:
                yield None
                return
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                try:
                    same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
                except FileNotFoundError:
                    same = False
                if same:
                    yield fd
                    return
            finally:
                os.close(fd)  # also releases the lock


def _complete_length(fd: int, size: int) -> int:
    """The length of the file up to and including its last newline."""
    end = size
    while end > 0:
        start = max(0, end - 4096)
        block = os.pread(fd, end - start, start)
        cut = block.rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        end = start
    return 0


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
