"""A store's two write failures: a lock another process holds (retried with backoff as long as it
takes, told to a `BusyCallback`; tests set `RELGRADE_STORE_BUSY_*`), and a full disk
(SQLITE_FULL, ENOSPC, EDQUOT: `StoreFullError`, naming the file system)."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from grader.errors import StoreError

BUSY_TIMEOUT_S = 2.0  # one attempt waits this long inside SQLite before we report and back off
JOURNAL_AFTER_S = 10.0  # answers held longer than this go to the journal beside the store
REPORT_EVERY_S = 30.0  # while a wait lasts, report it again this often
BACKOFF_S = (0.05, 1.0)  # first and longest pause between attempts

_SQLITE_BUSY = 5
_SQLITE_LOCKED = 6
_SQLITE_IOERR = 10
_SQLITE_FULL = 13
_LOW_BYTES = 64 * 1024  # less room than this is none for a store (a few pages)


@dataclass(frozen=True)
class StoreBusyEvent:
    """A wait for the store's write lock: `what` waits, for `waited_s` so far, with `held` answers
    in memory and `journaled` ones in the journal; `over` when it ended."""

    path: Path
    what: str
    waited_s: float
    held: int = 0
    journaled: int = 0
    journal: Path | None = None
    over: bool = False


BusyCallback = Callable[[StoreBusyEvent], None]
"""Told about waits for the store's lock; may be called from the writer's thread."""


class StoreBusyError(StoreError):
    """The store's lock was not free within one attempt (where the caller asked not to wait)."""


def is_busy(exc: sqlite3.OperationalError) -> bool:
    """Whether `exc` says another connection holds a lock (SQLITE_BUSY / SQLITE_LOCKED)."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
    text = str(exc)
    return "database is locked" in text or "database table is locked" in text


def seconds_from_env(name: str, default: float) -> float:
    """A duration from environment variable `name` (`2`, `1.5s`, `500ms`), else `default`."""
    raw = os.environ.get(name, "").strip().lower()
    if not raw:
        return default
    found = re.fullmatch(r"(\d+\.?\d*|\.\d+)\s*(ms|s)?", raw)
    if found is None:
        raise StoreError(
            f"${name}={os.environ[name]!r} is not a duration; give seconds, e.g. {name}=2 or 500ms"
        )
    return float(found[1]) * (0.001 if found[2] == "ms" else 1.0)


class BusyWait:
    """One wait for the lock: backoff between attempts (`failed`) and the events to report."""

    def __init__(self, path: Path, what: str, report: BusyCallback | None) -> None:
        self.path = path
        self.what = what
        self.report = report
        self.started = time.monotonic()
        self.reported_at: float | None = None
        self.pause = BACKOFF_S[0]

    @property
    def waited_s(self) -> float:
        """Seconds since the first attempt."""
        return time.monotonic() - self.started

    def failed(self, *, held: int = 0, journaled: int = 0, journal: Path | None = None) -> None:
        """An attempt found the lock held: report when due, then pause (doubling each time)."""
        now = time.monotonic()
        if self.reported_at is None or now - self.reported_at >= REPORT_EVERY_S:
            self.reported_at = now
            self.tell(held=held, journaled=journaled, journal=journal)
        time.sleep(self.pause)
        self.pause = min(self.pause * 2, BACKOFF_S[1])

    def tell(
        self, *, held: int = 0, journaled: int = 0, journal: Path | None = None, over: bool = False
    ) -> None:
        """Report the wait as it stands now."""
        if self.report is not None:
            waited = self.waited_s
            self.report(
                StoreBusyEvent(self.path, self.what, waited, held, journaled, journal, over)
            )

    def done(self, *, journaled: int = 0, journal: Path | None = None) -> None:
        """The lock was obtained: report that the wait is over (if it was reported at all)."""
        if self.reported_at is not None:
            self.tell(journaled=journaled, journal=journal, over=True)


class StoreFullError(StoreError):
    """The file system holding the store (or its journal) has no room left."""

    exit_code = 2


def is_full(exc: BaseException, path: str | Path | None = None) -> bool:
    """Whether `exc` says a disk (or quota) is full; with the store's `path`, also a SQLite
    I/O error while its file system has no room left (growing the WAL index fails so)."""
    if isinstance(exc, StoreFullError):
        return True
    if isinstance(exc, sqlite3.DatabaseError):
        code = getattr(exc, "sqlite_errorcode", None)
        if isinstance(code, int) and code & 0xFF == _SQLITE_IOERR and path is not None:
            with contextlib.suppress(OSError):  # (next to) no room left there
                stat = os.statvfs(Path(path).resolve().parent)
                return stat.f_bavail * stat.f_frsize < _LOW_BYTES
            return False
        if isinstance(code, int):
            return code & 0xFF == _SQLITE_FULL
        return "database or disk is full" in str(exc)
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def file_system(path: str | Path) -> str:
    """The file system holding `path`, for a message: mount point (the last mount at the longest
    point holding it in /proc/mounts), type and room left."""
    folder = Path(path).resolve()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        with open("/proc/mounts", encoding="utf-8", errors="replace") as fh:
            mounts = [(f[1].replace("\\040", " "), f[2]) for f in map(str.split, fh) if len(f) > 2]
    except OSError:
        mounts = []
    inside = [m for m in reversed(mounts) if folder.is_relative_to(m[0])]
    point, kind = max(inside, key=lambda m: len(m[0]), default=("/", "?"))
    try:
        stat = os.statvfs(folder)
        left, size = stat.f_bavail * stat.f_frsize / 1e6, stat.f_blocks * stat.f_frsize / 1e6
        free = f", {left:,.1f} MB free of {size:,.1f} MB"
    except OSError:
        free = ""
    return f"the file system mounted at {point} ({kind}{free})"


def full_error(path: str | Path, what: str) -> StoreFullError:
    """The error of a write to `path` that found its file system full."""
    return StoreFullError(
        f"{path}: no room left on {file_system(path)} while {what}; free space there (or move "
        "the store to a larger disk with its journal beside it) and rerun the same command"
    )


def roll_back(conn: sqlite3.Connection, exc: BaseException, path: str | Path, what: str) -> None:
    """After `exc` in a transaction on `conn`: roll it back if SQLite has not, and raise
    `StoreFullError` when the disk is full (the caller re-raises any other error)."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")
    if is_full(exc, path) and not isinstance(exc, StoreFullError):
        raise full_error(path, what) from None
