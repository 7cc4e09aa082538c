"""Streams read once (a pipe, FIFO, `<(...)` or `-`), copied to a temporary file as far as read.

A reader may open a file several times (its head, the fast reader, an error's line): every open
in this process reads the copy, so answers and `file:line` errors are those of a regular file."""

from __future__ import annotations

import atexit
import contextlib
import io
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import IO

from grader.errors import InputError
from grader.io.streams import CHUNK, MAGIC, coded, compression_of, guarded

STDIN = "-"
"""The path that means the process's stdin, in every command (named "stdin" in errors)."""

_spools: dict[str, tuple[object, _Spool]] = {}  # path -> (what the stream is, its copy)
_folder: list[Path] = []


def open_binary(path: str | Path) -> IO[bytes]:
    """`path` opened for reading its text's bytes: a regular file decompressed as its name says, or
    a stream's copy (later opens read it again from the start); `-` is stdin. InputError when it
    does not exist or is a folder."""
    p = Path(path)
    if str(path) == STDIN:  # the same `sys.stdin` (held by its copy: its id is not reused)
        ident: object = id(sys.stdin.buffer)
    else:
        try:
            st = os.stat(p)
        except FileNotFoundError:
            raise InputError("file not found", path=p, hint="check the path") from None
        except OSError as exc:
            raise InputError(f"cannot open: {exc.strerror}", path=p) from None
        if stat.S_ISDIR(st.st_mode):
            raise InputError("is a folder, not a file", path=p)
        if stat.S_ISREG(st.st_mode):
            compression = compression_of(p)
            return guarded(coded(open(p, "rb"), compression, "rb"), p, compression)
        ident = (st.st_dev, st.st_ino)
    known = _spools.get(str(path))
    if known is None or known[0] != ident:
        if str(path) == STDIN:
            copy = _Spool(sys.stdin.buffer, "stdin", owned=False)
        else:
            copy = _Spool(open(p, "rb"), p)  # noqa: SIM115 (held until the stream ends)
        known = _spools[str(path)] = (ident, copy)
    return io.BufferedReader(_SpoolReader(known[1]), CHUNK)


class _Spool:
    """A stream copied to a temporary file as far as it has been read."""

    def __init__(self, raw: IO[bytes], name: str | Path, *, owned: bool = True) -> None:
        head = raw.read(8)  # a buffered read: 8 bytes unless the stream ends first
        self.owned = owned  # close `raw` at its end (not a stream the caller gave, e.g. stdin)
        magic = next((c for m, c in MAGIC if head.startswith(m)), None)
        self.name, self.raw = name, raw
        compression = compression_of(name) or magic
        source = coded(_Prefixed(head, raw), compression, "rb")  # type: ignore[arg-type]
        self.source = guarded(source, name, compression)
        self.copy = _new_copy()
        self.out = open(self.copy, "wb")  # noqa: SIM115 (written as the stream is read)
        self.size = 0  # bytes copied
        self.done = False
        self.error: InputError | None = None

    def pull(self) -> bool:
        """Copy one more chunk of the stream; False at its end. An error is raised again by every
        later pull."""
        if self.error is not None:
            raise self.error
        if self.done:
            return False
        try:
            data = self.source.read(CHUNK)
        except InputError as exc:
            self._fail(InputError(exc.reason, path=self.name, hint=exc.hint))
        if not data:
            self.done = True
            self._close()
            return False
        try:
            self.out.write(data)
            self.out.flush()
        except OSError as exc:
            self.copy.unlink(missing_ok=True)  # what room it took is given back
            self._fail(_no_room(self.name, self.copy, exc))
        self.size += len(data)
        return True

    def _fail(self, error: InputError) -> None:
        self.error = error
        self._close()
        raise error

    def _close(self) -> None:
        with contextlib.suppress(OSError):  # a full disk fails the last flush again
            self.out.close()
        if self.owned:
            self.raw.close()


class _SpoolReader(io.RawIOBase):
    """One open of a spooled stream: reads the copy, pulling the stream at its end."""

    def __init__(self, spool: _Spool) -> None:
        if spool.error is not None:  # the stream failed (its copy may be gone): say why again
            raise spool.error
        self._spool = spool
        self._fh = open(spool.copy, "rb", buffering=0)  # noqa: SIM115 (closed by close())
        self._pos = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        while self._pos >= self._spool.size and self._spool.pull():
            pass
        n = self._fh.readinto(buffer) or 0
        self._pos += n
        return n

    def close(self) -> None:
        self._fh.close()
        super().close()


class _Prefixed(io.RawIOBase):
    """`head` then the rest of `raw`: the stream with the bytes already looked at put back."""

    def __init__(self, head: bytes, raw: IO[bytes]) -> None:
        self._head, self._raw = head, raw

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        if self._head:
            n = min(len(view), len(self._head))
            view[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._raw.read(len(view))
        view[: len(data)] = data
        return len(data)


def _new_copy() -> Path:
    import tempfile

    try:
        if not _folder:
            folder = Path(tempfile.mkdtemp(prefix="relgrade-streams-"))
            atexit.register(shutil.rmtree, folder, ignore_errors=True)
            _folder.append(folder)
        fd, name = tempfile.mkstemp(prefix="input-", suffix=".txt", dir=_folder[0])
    except OSError as exc:
        raise _no_room("a stream", Path(tempfile.gettempdir()), exc) from None
    os.close(fd)
    return Path(name)


def _no_room(name: str | Path, where: Path, exc: OSError) -> InputError:
    """The error for a stream that cannot be copied to the temporary folder (full, read-only)."""
    return InputError(
        f"cannot copy it to a temporary file in {where.parent if where.suffix else where} "
        f"({exc.strerror or exc})",
        path=name,
        hint="free space there, or set TMPDIR to a folder with room (the copy takes the "
        "size of the decompressed input)",
    )
