"""TREC files into Arrow columns, in blocks of 16 MiB of whole lines read by pyarrow's CSV reader.

A block it rejects has its lines checked (`check_lines`), so a bad line is named in one block's
memory; one without a bad line (repeated or mixed spaces and tabs, a byte order mark) is read
with its whitespace normalised. The checks split cells on runs of spaces and tabs as the
normalised read does, and are never stricter."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from grader.errors import InputError
from grader.io.files import iter_lines
from grader.io.spool import open_binary
from grader.io.streams import READ_ERRORS, TREC_LINE_LIMIT, line_too_long, not_utf8

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
    """(lines before it, a block of whole lines) of `path`, read `size` bytes at a time. A line
    over TREC_LINE_LIMIT ends them, yielded as far as read for `check_lines` to name."""
    before = 0
    carry = b""
    with open_binary(path) as fh:
        while data := fh.read(size):
            block = carry + data
            cut = block.rfind(b"\n") + 1
            block, carry = block[:cut], block[cut:]
            if block:
                yield before, block
                before += block.count(b"\n")
            if len(carry) > TREC_LINE_LIMIT:
                break
    if carry:
        yield before, carry


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


_ID_COLUMNS = ("query_id", "doc_id")
_BOM = b"\xef\xbb\xbf"
_PARSE_BLOCK = 1 << 24  # the file is parsed in blocks of 16 MiB of whole lines
_CHUNK = _PARSE_BLOCK + 2 * TREC_LINE_LIMIT  # a block is one chunk (columns converted in parallel)


def is_comment(line: str) -> bool:
    """Whether a line is a `#` comment (its first non-blank character is `#`), as trec_eval 10."""
    return line.lstrip().startswith("#")


def parse_columns(path: Path, layout: Layout, number_error: NumberCheck) -> pa.Table:
    """The file as an Arrow table, ids as large strings and the number column as float64; a bad
    line (column count, UTF-8, a number `number_error` refuses) raises InputError naming it."""
    tables = [table for _, _, table in table_blocks(path, layout, number_error)]
    return pa.concat_tables(tables) if tables else _empty(layout, pa.large_string())


def table_blocks(
    path: Path,
    layout: Layout,
    number_error: NumberCheck,
    *,
    size: int = _PARSE_BLOCK,
    ids: pa.DataType | None = None,
    chunk: int = _CHUNK,
) -> Iterator[tuple[int, bytes, pa.Table]]:
    """(lines before it, a block of whole lines, its table, ids typed `ids`) of the file: read by
    Arrow as sniffed, else its first bad line raises, else it is read normalised."""
    ids = ids or pa.large_string()
    sniffed = sniff_delimiter(path, layout.kind)
    for before, block in line_blocks(path, size):
        table = arrow_table(block, layout, sniffed, ids=ids, chunk=chunk)
        if table is None:
            check_lines(path, block, before, layout, number_error)
            text = block if before else block.removeprefix(_BOM)
            table = _irregular_block(text, layout, ids, path)
        yield before, block, table


_HEAD = 4096


def sniff_delimiter(path: Path, kind: str) -> tuple[str, int] | None:
    """(the delimiter, the number of cells) of the file's first data line when it has one kind of
    single separator, else None; a head not UTF-8 text raises (`check_text_head`)."""
    head = check_text_head(path, kind)[:_HEAD]
    if not head or head.startswith(_BOM):
        return None
    lines = head.split(b"\n")
    if len(head) == _HEAD:
        lines.pop()  # may be cut short
    first = next((s for s in lines if s.strip() and not s.lstrip().startswith(b"#")), b"")
    first = first.rstrip(b"\r")
    for delim, other in ((b" ", b"\t"), (b"\t", b" ")):
        if delim in first and other not in first and delim + delim not in first:
            if first.startswith(delim) or first.endswith(delim):
                return None
            return delim.decode(), len(first.split(delim))
    return None


def arrow_table(
    block: bytes, layout: Layout, sniffed: tuple[str, int] | None, *, ids: pa.DataType, chunk: int
) -> pa.Table | None:
    """A block of whole lines read by pyarrow when it is regular; None means: check its lines."""
    if sniffed is None or not plain_block(block):
        return None  # not sniffed, a NUL byte, or a line over the limit: `check_lines` names it
    try:
        table = _read_block(block, layout, sniffed, ids, chunk)
    except pa.ArrowException:
        return None
    comments = pc.starts_with(table.column(0), "#")  # comments that have the right width
    if table.num_rows and pc.any(comments).as_py():
        table = table.filter(pc.invert(comments))
    if table.column(layout.numeric).null_count:
        return None  # an empty numeric field
    for name in layout.names:
        if name != layout.numeric and pc.any(pc.equal(table.column(name), "")).as_py():
            return None  # an empty field: a doubled or trailing delimiter somewhere
    return table


def _read_block(
    block: bytes, layout: Layout, sniffed: tuple[str, int], ids: pa.DataType, chunk: int
) -> pa.Table:
    """A block of lines of `sniffed` (delimiter, cells per line) read by Arrow in chunks of `chunk`
    bytes parsed in parallel; pa.ArrowException when Arrow cannot take it."""
    delimiter, width = sniffed
    columns = list(layout.names)
    if layout.extra_columns and width > len(columns):
        columns += [f"extra_{i}" for i in range(width - len(columns))]  # read, then dropped
    return pacsv.read_csv(
        pa.BufferReader(block),
        read_options=pacsv.ReadOptions(column_names=columns, block_size=chunk),
        parse_options=pacsv.ParseOptions(
            delimiter=delimiter,
            quote_char=False,
            escape_char=False,
            ignore_empty_lines=True,
            # comment lines of another width are skipped
            invalid_row_handler=lambda row: "skip" if is_comment(row.text) else "error",
        ),
        convert_options=pacsv.ConvertOptions(
            column_types=_types(layout, ids),
            include_columns=list(layout.names),
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
            check_utf8=True,
        ),
    )


def _irregular_block(block: bytes, layout: Layout, ids: pa.DataType, path: Path) -> pa.Table:
    """A block without bad lines read with its whitespace normalised; a run's lines of several
    widths are cut to their first columns."""
    if not block.strip(b" \t\r\n"):
        return _empty(layout, ids)  # blank lines only: Arrow would call it an empty file
    text = _COMMENT.sub(rb"\1", _normalised(block))
    width = len(layout.names)
    try:
        if not plain_block(block):
            raise pa.ArrowInvalid("a NUL byte or an over-long line")
        if layout.extra_columns:
            try:
                wide = (" ", max(width, _first_width(text)))
                return _read_block(text, layout, wide, ids, _CHUNK)
            except pa.ArrowException:
                text = _FIRST_CELLS[width].sub(rb"\1\2", text)
        return _read_block(text, layout, (" ", width), ids, _CHUNK)
    except pa.ArrowException as exc:
        raise InputError(
            f"cannot parse {layout.kind} file: {str(exc).splitlines()[0][:200]}",
            path=path,
            hint=layout.hint,
        ) from None


_COMMENT = re.compile(rb"(^|\r)#[^\r\n]*", re.MULTILINE)
_FIRST_CELLS = {
    n: re.compile(rb"(^|\r)((?:[^ \r\n]+ ){%d}[^ \r\n]+) [^\r\n]*" % (n - 1), re.MULTILINE)
    for n in (4, 6)
}
"""A normalised line's first n cells (a qrels' 4, a run's 6) and the rest, to cut the rest."""


def _normalised(block: bytes) -> bytes:
    """A block with the spaces and tabs between cells made one space and none at a line's ends."""
    block = block.replace(b"\t", b" ")
    while b"  " in block:
        block = block.replace(b"  ", b" ")
    for end in (b"\n", b"\r"):
        block = block.replace(b" " + end, end).replace(end + b" ", end)
    return block.strip(b" ")


def _first_width(text: bytes) -> int:
    """The number of cells of the first line of a normalised block without comments."""
    first = re.search(rb"[^\r\n]+", text)
    return first.group().count(b" ") + 1 if first else 0


def _types(layout: Layout, ids: pa.DataType) -> dict[str, pa.DataType]:
    """The type of each column: ids as `ids`, the number column float64, others strings."""
    return {
        n: pa.float64() if n == layout.numeric else ids if n in _ID_COLUMNS else pa.string()
        for n in layout.names
    }


def _empty(layout: Layout, ids: pa.DataType) -> pa.Table:
    """The table of a file without data lines."""
    return pa.table({n: pa.array([], t) for n, t in _types(layout, ids).items()})


def lines_of(path: Path, rows: Sequence[int]) -> list[tuple[int, str]]:
    """(file line, text) of parsed `rows`, streaming the file up to the last (for messages)."""
    wanted = set(rows)
    found: dict[int, tuple[int, str]] = {}
    row = -1
    for lineno, text in iter_lines(path):
        if text.strip() and not is_comment(text):
            row += 1
            if row in wanted:
                found[row] = (lineno, text)
                if len(found) == len(wanted):
                    break
    return [found[r] for r in rows]
