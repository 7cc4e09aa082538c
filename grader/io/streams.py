"""Compression and bounded lines, shared by every reader and writer.

- Compression is told by the name: `.gz`, `.bz2`, `.xz` (the standard library) and `.zst`
  (pyarrow's zstd codec, already a dependency); a stream whose name says nothing is told by
  its first bytes (`MAGIC`, used by `grader.io.spool`). Writers compress as the name says.
- A line longer than a limit is an InputError naming file and line, raised once the limit of
  it is read (`bounded_lines`; `line_too_long` is the one message, which the TREC readers
  raise at their own, smaller limit too). LINE_LIMIT also bounds CSV fields.
"""

from __future__ import annotations

import io
import lzma
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from grader.errors import InputError

LINE_LIMIT = 64 << 20
"""The longest line any reader takes (64 MiB: a JSONL document, a CSV row); TREC readers allow
less (`grader.io.trec_lines.TREC_LINE_LIMIT`)."""


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
READ_ERRORS = (OSError, EOFError, lzma.LZMAError)
"""What reading a file or a corrupt compressed one raises (gzip.BadGzipFile is an OSError)."""
CHUNK = 1 << 20


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
    while data := fh.read(CHUNK):
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
