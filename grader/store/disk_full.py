"""A full disk under the store (SQLITE_FULL, ENOSPC, EDQUOT): `StoreFullError`, naming the file
system."""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
from pathlib import Path

from grader.errors import StoreError

_SQLITE_IOERR = 10
_SQLITE_FULL = 13
_LOW_BYTES = 64 * 1024  # less room than this is none for a store (a few pages)


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


def _mount_of(path: Path) -> tuple[str, str]:
    """(mount point, type) of the last mount at the longest point holding `path` (/proc/mounts)."""
    try:
        with open("/proc/mounts", encoding="utf-8", errors="replace") as fh:
            mounts = [(f[1].replace("\\040", " "), f[2]) for f in map(str.split, fh) if len(f) > 2]
    except OSError:
        mounts = []
    inside = [m for m in reversed(mounts) if path.is_relative_to(m[0])]
    return max(inside, key=lambda m: len(m[0]), default=("/", "?"))


def file_system(path: str | Path) -> str:
    """The file system holding `path`, for a message: mount point, type and room left."""
    folder = Path(path).resolve()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    point, kind = _mount_of(folder)
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
