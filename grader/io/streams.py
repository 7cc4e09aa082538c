"""Opening input files: compressed ones decompressed, streams read once, lines bounded.

- Compression is told by the name: `.gz`, `.bz2`, `.xz` (the standard library) and `.zst`
  (pyarrow's zstd codec, already a dependency). A stream (below) whose name says nothing is
  told by its first bytes (gzip, bzip2, xz and zstd magic), so `<(cat run.gz)` reads as
  `run.gz` does.
- A path that is not a regular file (a pipe, `<(...)` i.e. /dev/fd/N, a FIFO, /dev/stdin, a
  device) can be read only once, while a reader may open a file several times (a look at its
  head, the fast reader, the exact line of an error). Its first open copies its text,
  decompressed, to a temporary file that every later open of that path in this process reads;
  so answers and `file:line` errors are those of the same text in a regular file, and errors
  name the path as given. The copies are removed when the process ends.
- A line longer than LINE_LIMIT stops that copy with an error naming the file and line, so a
  stream without newlines (`/dev/zero`) fails after the limit, never filling memory or disk;
  `line_too_long` is the one message, which `iter_lines` and the TREC readers (at their own,
  smaller limit) raise too.
"""

from __future__ import annotations

import atexit
import io
import lzma
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from grader.errors import InputError

LINE_LIMIT = 64 << 20
"""The longest line any reader takes (64 MiB: a JSONL document, a CSV row); TREC readers allow
less (`grader.io.trec_scan.TREC_LINE_LIMIT`)."""


def allow_long_csv_fields() -> None:
    """Let Python's csv module read fields up to LINE_LIMIT (its default stops at 131,072
    characters): what relgrade writes, a sample with a long document, reads back whole."""
    import csv

    if csv.field_size_limit() < LINE_LIMIT:
        csv.field_size_limit(LINE_LIMIT)


COMPRESSED = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd"}
_MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bz2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
)
READ_ERRORS = (OSError, EOFError, lzma.LZMAError)
"""What reading a file or a corrupt compressed one raises (gzip.BadGzipFile is an OSError)."""
_CHUNK = 1 << 20
_copies: dict[str, tuple[tuple[int, int], Path | InputError]] = {}
_folder: list[Path] = []


def compression_of(path: str | Path) -> str | None:
    """The compression a file name says (`gzip`, `bz2`, `xz`, `zstd`), or None."""
    return COMPRESSED.get(Path(path).suffix.lower())


def line_too_long(path: str | Path, line: int, limit: int) -> InputError:
    """The error for a line longer than `limit` bytes (no newline within them)."""
    return InputError(
        f"a line longer than {_size(limit)}; this looks like a binary "
        "file or a file without line breaks",
        path=path,
        line=line,
        hint="give a text file with one record per line",
    )


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n:,} bytes"


def bounded_lines(fh: IO[bytes], name: str | Path, limit: int) -> Iterator[bytes]:
    """The lines of `fh` without their newline, read in chunks; a line longer than `limit`
    bytes is an InputError naming `name` and the line, raised once `limit` bytes of it are
    read (never more held)."""
    done = 0  # lines yielded
    pieces: list[bytes] = []  # the line not yet ended
    held = 0
    while data := fh.read(_CHUNK):
        if b"\n" not in data:
            pieces.append(data)
            held += len(data)
            if held > limit:
                raise line_too_long(name, done + 1, limit)
            continue
        lines = data.split(b"\n")
        if pieces:
            lines[0] = b"".join([*pieces, lines[0]])
            pieces, held = [], 0
        tail = lines.pop()
        for line in lines:
            done += 1
            if len(line) > limit:
                raise line_too_long(name, done, limit)
            yield line
        if tail:
            pieces, held = [tail], len(tail)
            if held > limit:
                raise line_too_long(name, done + 1, limit)
    if pieces:
        line = b"".join(pieces)
        if len(line) > limit:
            raise line_too_long(name, done + 1, limit)
        yield line


def decompressed(raw: IO[bytes], compression: str | None) -> IO[bytes]:
    """`raw` read through `compression` (None: as it is)."""
    if compression is None:
        return raw
    if compression == "gzip":
        import gzip

        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    if compression == "bz2":
        import bz2

        return bz2.BZ2File(raw, "rb")
    if compression == "xz":
        return lzma.LZMAFile(raw, "rb")
    import pyarrow as pa  # zstd: pyarrow's codec (no other dependency)

    stream = pa.CompressedInputStream(pa.PythonFile(raw, mode="r"), "zstd")
    return io.BufferedReader(stream)


def compressed_writer(raw: IO[bytes], compression: str | None) -> IO[bytes]:
    """A binary writer compressing into `raw` (None: `raw` itself); closing it leaves `raw`
    open (the caller syncs and closes it)."""
    if compression is None:
        return raw
    if compression == "gzip":
        import gzip

        return gzip.GzipFile(fileobj=raw, mode="wb", mtime=0)  # type: ignore[return-value]
    if compression == "bz2":
        import bz2

        return bz2.BZ2File(raw, "wb")
    if compression == "xz":
        return lzma.LZMAFile(raw, "wb")
    import pyarrow as pa

    sink = pa.PythonFile(_Unclosed(raw), mode="w")
    stream: IO[bytes] = pa.CompressedOutputStream(sink, "zstd")
    return stream


class _Unclosed(io.RawIOBase):
    """Writes go to `raw`; closing this leaves `raw` open."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        return self._raw.write(data)


def local_file(path: str | Path) -> Path:
    """The regular file to read `path` from: `path` itself, or for a stream its text copied
    (once per process, decompressed) to a temporary file. InputError when it does not exist, is
    a folder, or a line of the stream is longer than LINE_LIMIT."""
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise InputError("file not found", path=p, hint="check the path") from None
    except OSError as exc:
        raise InputError(f"cannot open: {exc.strerror}", path=p) from None
    if stat.S_ISDIR(st.st_mode):
        raise InputError("is a folder, not a file", path=p)
    if stat.S_ISREG(st.st_mode):
        return p
    ident = (st.st_dev, st.st_ino)
    known = _copies.get(str(p))
    if known is not None and known[0] == ident:
        if isinstance(known[1], InputError):
            raise known[1]  # a stream is read once: its error stays the answer
        return known[1]
    try:
        with open(p, "rb") as raw:
            copy = spool(raw, p)
    except InputError as exc:
        _copies[str(p)] = (ident, exc)
        raise
    _copies[str(p)] = (ident, copy)
    return copy


def spool(raw: IO[bytes], name: str | Path) -> Path:
    """Copy stream `raw` (decompressed when its first bytes or `name` say so) to a new temporary
    file, checking line lengths; errors name `name`."""
    head = _read_head(raw)
    compression = compression_of(name) or next((c for m, c in _MAGIC if head.startswith(m)), None)
    copy = _new_copy()
    try:
        with open(copy, "wb") as out:
            source = decompressed(_Prefixed(head, raw), compression)  # type: ignore[arg-type]
            _copy_lines(source, out, name)
    except BaseException:
        copy.unlink(missing_ok=True)
        raise
    return copy


def _read_head(raw: IO[bytes]) -> bytes:
    head = b""
    while len(head) < 8:
        data = raw.read(8 - len(head))
        if not data:
            break
        head += data
    return head


def _copy_lines(source: IO[bytes], out: IO[bytes], name: str | Path) -> None:
    lines = 0  # complete lines copied
    open_line = 0  # bytes of the line not yet ended
    try:
        while data := source.read(_CHUNK):
            first = data.find(b"\n")
            if first < 0:
                open_line += len(data)
            elif open_line + first > LINE_LIMIT:
                raise line_too_long(name, lines + 1, LINE_LIMIT)
            else:
                lines += data.count(b"\n")
                open_line = len(data) - data.rfind(b"\n") - 1
            if open_line > LINE_LIMIT:
                raise line_too_long(name, lines + 1, LINE_LIMIT)
            out.write(data)
    except READ_ERRORS as exc:  # a cut or corrupt compressed stream
        raise InputError(f"cannot read: {exc}", path=name, line=lines + 1) from None
    except Exception as exc:  # pyarrow's ArrowInvalid for a corrupt zstd stream
        if type(exc).__module__.startswith("pyarrow"):
            raise InputError(f"cannot read: {exc}", path=name, line=lines + 1) from None
        raise


def _new_copy() -> Path:
    if not _folder:
        import tempfile

        folder = Path(tempfile.mkdtemp(prefix="relgrade-streams-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _folder.append(folder)
    import tempfile

    fd, name = tempfile.mkstemp(prefix="input-", suffix=".txt", dir=_folder[0])
    os.close(fd)
    return Path(name)


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


def open_binary(path: str | Path) -> IO[bytes]:
    """`path` opened for reading its text's bytes: a stream's copy, or the file decompressed as
    its name says."""
    p = Path(path)
    local = local_file(p)
    if local != p:
        return open(local, "rb")
    return decompressed(open(p, "rb"), compression_of(p))
