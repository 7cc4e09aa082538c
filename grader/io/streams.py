"""Compression and bounded lines, shared by every reader and writer.

Compression is told by the name (`.gz`, `.bz2`, `.xz`, `.zst`) or a stream's first bytes
(`MAGIC`); a line over a limit is an InputError naming file and line once the limit is read."""

from __future__ import annotations

import io
import lzma
import os
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Literal

from grader.errors import InputError

LINE_LIMIT = 64 << 20
"""The longest line any reader takes (64 MiB: a JSONL document, a CSV row)."""
TREC_LINE_LIMIT = 1 << 20
"""The longest TREC line read (1 MiB): a longer one is an error naming file and line."""


def allow_long_csv_fields() -> None:
    """Let Python's csv module read fields up to LINE_LIMIT (its default stops at 131,072
    characters): what relgrade writes, a sample with a long document, reads back whole."""
    import csv

    if csv.field_size_limit() < LINE_LIMIT:
        csv.field_size_limit(LINE_LIMIT)


COMPRESSED = {".gz": "gzip", ".bz2": "bz2", ".xz": "xz", ".zst": "zstd"}
MAGIC = (
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bz2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
)
READ_ERRORS = (OSError, EOFError, lzma.LZMAError, zlib.error)
"""What reading a file or a corrupt compressed one raises (gzip.BadGzipFile is an OSError)."""
CHUNK = 1 << 20

BLANK_LIMIT = 64 << 20
"""The most input read in a row without a data line before a reader stops: a decompression bomb of
blank lines fails in seconds. `RELGRADE_BLANK_LIMIT` (bytes) sets another bound.
"""
BLANK_LINES = 1 << 20
"""The most blank or comment lines read in a row (a reader spends its time per line: a
million one-byte lines cost as much as a large file)."""
BLANK_LIMIT_ENV = "RELGRADE_BLANK_LIMIT"
_SPACES = b" \t\r\f\v"
_PIECE = 16 << 10  # blank input is counted in pieces this large
_DATA_LINE = re.compile(rb"^[ \t\r\f\v]*[^\s#]", re.MULTILINE)  # neither blank nor a comment


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


def not_utf8(path: str | Path, line: int, byte: int) -> InputError:
    """The error for line `line`, not UTF-8 from its byte `byte` on."""
    hint = "re-encode the file as UTF-8"
    return InputError(f"not valid UTF-8 (byte {byte} of the line)", path=path, line=line, hint=hint)


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n:,} bytes"


def bounded_lines(fh: IO[bytes], name: str | Path, limit: int) -> Iterator[bytes]:
    """The lines of `fh` without their newline; a line over `limit` bytes is an InputError naming
    `name` and the line, raised once `limit` bytes of it are read."""
    done = 0  # lines yielded
    pieces: list[bytes] = []  # the line not yet ended
    held = 0
    while data := fh.read(CHUNK):
        *lines, tail = data.split(b"\n")
        for line in lines:
            if pieces:
                line, pieces, held = b"".join([*pieces, line]), [], 0
            done += 1
            if len(line) > limit:
                raise line_too_long(name, done, limit)
            yield line
        pieces.append(tail)
        held += len(tail)
        if held > limit:
            raise line_too_long(name, done + 1, limit)
    if held:
        yield b"".join(pieces)


def guarded(inner: IO[bytes], name: str | Path, compression: str | None) -> IO[bytes]:
    """`inner` read without tracebacks or unbounded reads: a corrupt or cut stream, or more than
    `BLANK_LIMIT` read without a data line, is an InputError naming `name`."""
    return io.BufferedReader(_Guarded(inner, name, compression), CHUNK)


class _Guarded(io.RawIOBase):
    """See `guarded`."""

    def __init__(self, inner: IO[bytes], name: str | Path, compression: str | None) -> None:
        self._inner, self._name, self._compression = inner, name, compression
        given = os.environ.get(BLANK_LIMIT_ENV, "")  # bytes, and as many lines at most
        self._limit = int(given) if given.isdigit() else BLANK_LIMIT
        self._line_limit = min(BLANK_LINES, self._limit)
        self._blank = self._lines = 0  # bytes, lines read since the last piece with a data line
        self._open: str | None = None  # the line a piece ended in: blank, comment, data

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        view = memoryview(buffer).cast("B")
        try:
            n = self._inner.readinto(view)  # type: ignore[attr-defined]
        except READ_ERRORS as exc:
            what = f"{self._compression} data " if self._compression else ""
            raise InputError(
                f"cannot read {what}({exc or type(exc).__name__})",
                path=self._name,
                hint="the file is damaged or cut short: make it again from its source"
                if self._compression
                else None,
            ) from None
        for start in range(0, n or 0, _PIECE):  # a data line resets the count, piece by piece
            piece = view[start : min(n, start + _PIECE)]
            if self._data_in(piece.tobytes()):
                self._blank = self._lines = 0
                continue
            self._blank += len(piece)
            self._lines += piece.tobytes().count(b"\n")  # (a blank piece: rare, not hot)
            if self._blank > self._limit or self._lines > self._line_limit:
                raise InputError(
                    f"{self._lines:,} lines ({_size(self._blank)}) in a row without a data "
                    "line (only blank or `#` comment lines): stopped reading",
                    path=self._name,
                    hint=f"a file of nothing but blank lines, e.g. a decompression bomb; "
                    f"{BLANK_LIMIT_ENV}=BYTES sets the bound",
                )
        return n or 0

    def _data_in(self, piece: bytes) -> bool:
        """Whether `piece` holds (part of) a data line; remembers what line it ends in."""
        cut = piece.find(b"\n")
        first = piece if cut < 0 else piece[:cut]  # the rest of the line the piece before ended in
        kind = self._open
        if kind in (None, "blank"):
            kind = _kind(first)
        if cut < 0:
            self._open = kind
            return kind == "data"
        rest = piece[cut + 1 :]  # from a line's start
        self._open = None if rest.endswith(b"\n") or not rest else _kind(rest)
        return kind == "data" or _DATA_LINE.search(rest) is not None

    def close(self) -> None:
        self._inner.close()
        super().close()


def _kind(text: bytes) -> str:
    """What the last line of `text`, unfinished, is so far: blank, comment or data."""
    start = text[text.rfind(b"\n") + 1 :].lstrip(_SPACES)
    return ("comment" if start[:1] == b"#" else "data") if start else "blank"


def coded(raw: IO[bytes], compression: str | None, mode: Literal["rb", "wb"]) -> IO[bytes]:
    """`raw` read or written through `compression` (None: `raw` itself); closing a writer leaves
    `raw` open (the caller syncs and closes it)."""
    if compression is None:
        return raw
    if compression == "gzip":
        import gzip

        return gzip.GzipFile(fileobj=raw, mode=mode, mtime=0)  # type: ignore[return-value]
    if compression in ("bz2", "xz"):
        import bz2

        return (bz2.BZ2File if compression == "bz2" else lzma.LZMAFile)(raw, mode)
    import pyarrow as pa  # zstd: pyarrow's codec (no other dependency)

    if mode == "rb":
        return io.BufferedReader(pa.CompressedInputStream(pa.PythonFile(raw, mode="r"), "zstd"))
    stream: IO[bytes] = pa.CompressedOutputStream(pa.PythonFile(_Unclosed(raw), mode="w"), "zstd")
    return stream


class _Unclosed(io.RawIOBase):
    """Writes go to `raw`; closing this leaves `raw` open."""

    def __init__(self, raw: IO[bytes]) -> None:
        self._raw = raw

    def writable(self) -> bool:
        return True

    def write(self, data: bytes) -> int:  # type: ignore[override]
        return self._raw.write(data)
