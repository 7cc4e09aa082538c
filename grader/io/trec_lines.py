"""TREC files as blocks of whole lines, and the line checks that name the first bad line.

The checks split cells on runs of spaces and tabs as the normalised read does, and are never
stricter: a block rejected only for irregular whitespace passes them and is read normalised."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from grader.errors import InputError
from grader.io.spool import open_binary
from grader.io.streams import READ_ERRORS, line_too_long, not_utf8
from grader.io.streams import line_blocks as stream_blocks

TREC_LINE_LIMIT = 1 << 20
"""The longest TREC line read (1 MiB): a longer one is an error naming file and line."""
_CELL_SEPARATORS = re.compile(rb"[ \t]+")  # what the irregular path splits on

NumberCheck = Callable[[str, int], InputError | None]
"""(cell text, file line) -> the error for a number cell the caller refuses, else None."""


@dataclass(frozen=True)
class Layout:
    """The lines of a TREC file: its columns, the one holding a number, later columns allowed."""

    names: tuple[str, ...]
    numeric: str
    kind: str
    example: str
    extra_columns: bool = False

    @property
    def hint(self) -> str:
        return f"each line must be `{self.example}`, separated by spaces or tabs"


RUN = Layout(
    ("query_id", "q0", "doc_id", "file_rank", "score", "tag"),
    "score",
    "run",
    "qid Q0 docid rank score tag",
    extra_columns=True,
)
QRELS = Layout(("query_id", "iteration", "doc_id", "grade"), "grade", "qrels", "qid 0 docid grade")


def parses_as_number(cell: str) -> bool:
    """Whether Arrow's cast or pandas' to_numeric could take `cell` as a number: what float() takes
    but `_` separators and non-ASCII digits."""
    if not cell.isascii() or "_" in cell:
        return False
    try:
        float(cell)
    except ValueError:
        return False
    return True


def finite_number(cell: str) -> bool:
    """Whether `cell` is a number (see `parses_as_number`) and finite."""
    return parses_as_number(cell) and math.isfinite(float(cell))


def plain_block(block: bytes) -> bool:
    """Whether a block holds no NUL byte and no line over TREC_LINE_LIMIT (else `check_lines` names
    it). Only a half-limit window without a newline is looked at closer."""
    if b"\x00" in block:
        return False
    half = TREC_LINE_LIMIT // 2
    for start in range(0, len(block) - half + 1, half):
        if block.find(b"\n", start, start + half) < 0:
            lo = block.rfind(b"\n", 0, start) + 1
            hi = block.find(b"\n", start)
            if (len(block) if hi < 0 else hi) - lo > TREC_LINE_LIMIT:
                return False
    return True


def line_blocks(path: Path, size: int) -> Iterator[tuple[int, bytes]]:
    """`streams.line_blocks` of the file at `path`, lines up to TREC_LINE_LIMIT."""
    try:
        with open_binary(path) as fh:
            yield from stream_blocks(fh, path, size, TREC_LINE_LIMIT)
    except READ_ERRORS as exc:
        raise InputError(f"cannot read: {exc}", path=path) from None


TEXT_HEAD = TREC_LINE_LIMIT + 1
"""How much of a file `check_text_head` reads: a first line longer than the limit is told."""


def check_text_head(path: Path, kind: str) -> bytes:
    """The head of `path`; InputError when it is not UTF-8 text (bad UTF-8, a NUL byte, no line
    break within the limit), so a binary file is not blamed for a column count. Unreadable: b""."""
    try:
        with open_binary(path) as fh:
            head = whole = fh.read(TEXT_HEAD)
    except (*READ_ERRORS, ValueError):
        return b""
    tail = b""
    if len(head) == TEXT_HEAD:  # whole lines only: a cut character is no error
        cut = head.rfind(b"\n") + 1
        head, tail = head[:cut], head[cut:]
    lines = head.split(b"\n")
    for offset, raw in enumerate(lines):
        error = _not_text(path, raw, offset + 1, kind)
        if error is not None:
            raise error
    nul = _not_text(path, tail[: tail.find(b"\x00") + 1], len(lines), kind)
    if nul is not None:
        raise nul
    if len(tail) > TREC_LINE_LIMIT:
        raise line_too_long(path, len(lines), TREC_LINE_LIMIT)
    return whole


def _not_text(path: Path, raw: bytes, lineno: int, kind: str) -> InputError | None:
    """The error for line `lineno` (`raw`) when it is not UTF-8 text, else None."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return not_utf8(path, lineno, exc.start)
    nul = raw.find(b"\x00")
    if nul >= 0:  # valid UTF-8, but no text file holds NUL: a binary file, or UTF-16
        return InputError(
            f"not UTF-8 text: a NUL byte (byte {nul} of the line); this looks like a binary "
            "file or text in another encoding such as UTF-16",
            path=path,
            line=lineno,
            hint=f"give the {kind} file as UTF-8 text",
        )
    return None


def _lines(block: bytes) -> Iterator[bytes]:
    """`block.split(b"\\n")` one line at a time (the list would hold the block twice)."""
    start = 0
    while (end := block.find(b"\n", start)) >= 0:
        yield block[start:end]
        start = end + 1
    yield block[start:]


def check_lines(
    path: Path, block: bytes, before: int, layout: Layout, number_error: NumberCheck
) -> None:
    """Raise at the first bad line of `block`, whose first line is file line `before + 1`."""
    names = layout.names
    index = names.index(layout.numeric)
    for offset, raw in enumerate(_lines(block)):
        lineno = before + offset + 1
        if len(raw) > TREC_LINE_LIMIT:
            raise line_too_long(path, lineno, TREC_LINE_LIMIT)
        not_text = _not_text(path, raw, lineno, layout.kind)
        if not_text is not None:
            raise not_text
        cells = [c for c in _CELL_SEPARATORS.split(raw.rstrip(b"\r")) if c]
        if not cells or cells[0].startswith(b"#"):
            continue  # blank or a comment
        if len(cells) < len(names) or (len(cells) > len(names) and not layout.extra_columns):
            raise InputError(
                f"expected {len(names)} columns in a {layout.kind} line, found {len(cells)}",
                path=path,
                line=lineno,
                hint=layout.hint,
            )
        error = number_error(cells[index].decode(), lineno)
        if error is not None:
            raise error
