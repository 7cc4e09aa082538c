"""An append-only journal beside the store for answers not stored yet, shared under a `flock` and
replayed idempotently. Named by the store's id, so a moved store finds it and another store made at
the old place never replays it; when the disk is full, rescue journals go to another file system."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import mmap
import os
import sqlite3
import tempfile
import uuid
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


def stored_id(conn: sqlite3.Connection) -> str | None:
    """The id of the store open on `conn`, or None when it has none yet."""
    try:
        row = conn.execute("SELECT store_id FROM store_identity WHERE one = 1").fetchone()
    except sqlite3.OperationalError:  # no table yet
        return None
    return str(row[0]) if row else None


def give_id(conn: sqlite3.Connection, now: str) -> str:
    """Give the store open on `conn` an id unless it has one (inside a write transaction)."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS store_identity (one INTEGER PRIMARY KEY CHECK (one = 1),"
        " store_id TEXT NOT NULL, made_at TEXT NOT NULL)"
    )
    conn.execute(
        "INSERT OR IGNORE INTO store_identity (one, store_id, made_at) VALUES (1, ?, ?)",
        (uuid.uuid4().hex, now),
    )
    return str(stored_id(conn))


def journals(store_path: Path, store_id: str | None) -> list[Journal]:
    """The journal beside the store at `store_path`, then its rescue journals: named by its id, or
    as before ids (by the store's name, and its resolved path) when `store_id` is None."""
    if store_id is None:
        resolved = str(Path(os.path.abspath(store_path)).resolve())
        digest = hashlib.sha256(resolved.encode("utf-8", "surrogateescape")).hexdigest()[:16]
        beside = store_path.with_name(store_path.name + ".journal.jsonl")
        name = f"{Path(resolved).name}-{digest}.journal.jsonl"
    else:
        name = f"relgrade-journal-{store_id}.jsonl"
        beside = store_path.with_name(name)
    state = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    temp = Path(tempfile.gettempdir())
    rescues = [Path(state) / "relgrade" / "journals", temp / "relgrade-journals"]
    return [Journal(beside), *(Journal(folder / name) for folder in rescues)]


class Journal:
    """A journal file (module docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path

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
        self.path.parent.mkdir(parents=True, exist_ok=True)  # (a rescue journal's folder)
        with self._locked(create=True) as fd:
            assert fd is not None
            size = os.fstat(fd).st_size
            if size:
                # A line cut short by a killed appender (we hold the lock, so it is dead): drop it.
                with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as text:
                    size = text.rfind(b"\n") + 1
                os.ftruncate(fd, size)
            try:
                with open(fd, "ab", closefd=False) as fh:  # (at the end)
                    fh.write(data)
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
            os.lseek(fd, 0, os.SEEK_SET)
            with open(fd, "rb", closefd=False) as fh:
                lines = fh.read().split(b"\n")
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
            if len(rows):
                write(rows)
            self.path.unlink()
            _fsync_dir(self.path.parent)
            return len(rows)

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


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
