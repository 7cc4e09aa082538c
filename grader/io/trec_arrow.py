"""TREC files into Arrow columns: the reader of every file `trec_small` does not take.

pyarrow's multi-threaded CSV reader takes blocks of 16 MiB of whole lines; a block it rejects
has its lines checked at once (`trec_lines`), so a bad line is named in that block's memory. A
file with no bad line that it still cannot take (repeated or mixed spaces and tabs, a byte order
mark) is read again with its whitespace normalised (`_irregular_table`), its numbers as text.
`#` comment lines are skipped and, with `extra_columns`, later columns ignored, as trec_eval 10.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from grader.errors import InputError
from grader.io.files import _open_binary, iter_lines
from grader.io.streams import READ_ERRORS
from grader.io.trec_lines import (
    TREC_LINE_LIMIT,
    NumberCheck,
    check_lines,
    check_text_head,
    line_blocks,
    parses_as_number,
    plain_block,
)

_ID_COLUMNS = ("query_id", "doc_id")
_BOM = b"\xef\xbb\xbf"


def is_comment(line: str) -> bool:
    """Whether a line is a `#` comment (its first non-blank character is `#`), as trec_eval 10."""
    return line.lstrip().startswith("#")


def parse_columns(
    path: Path,
    names: tuple[str, ...],
    numeric: str,
    kind: str,
    example: str,
    *,
    extra_columns: bool = False,
    number_error: NumberCheck | None = None,
) -> pa.Table:
    """The file as an Arrow table: ids as large strings, `numeric` as float64 (as text on the
    irregular path, for the caller to name a bad value). A bad line (column count, UTF-8, a
    `numeric` cell `number_error` refuses) raises; a file with none that Arrow rejects is irregular.
    """
    check_text_head(path, kind)  # a binary file is "not UTF-8", not a column count
    sniffed = sniff_delimiter(path)
    if sniffed is None:
        return _irregular_table(path, names, numeric, kind, example, extra_columns)
    number_error = number_error or _not_a_number(path, numeric)
    table = _arrow_blocks(
        path, names, numeric, kind, example, sniffed,
        extra_columns=extra_columns, number_error=number_error,
    )  # fmt: skip
    return (
        _irregular_table(path, names, numeric, kind, example, extra_columns)
        if table is None
        else table
    )


_PARSE_BLOCK = 1 << 24  # the fast path parses the file in blocks of 16 MiB of whole lines
_CHUNK = _PARSE_BLOCK + 2 * TREC_LINE_LIMIT  # a block is one chunk (columns converted in parallel)


def _arrow_blocks(
    path: Path,
    names: tuple[str, ...],
    numeric: str,
    kind: str,
    example: str,
    sniffed: tuple[str, int],
    *,
    extra_columns: bool,
    number_error: NumberCheck,
) -> pa.Table | None:
    """The file read by Arrow block by block. The first bad line of a rejected block raises; a
    rejected block without one (irregular whitespace) makes it None once every block is checked.
    """
    tables: list[pa.Table] | None = []
    for before, block in line_blocks(path, _PARSE_BLOCK):
        table = arrow_table(block, names, numeric, extra_columns, sniffed)
        if table is None:
            check_lines(
                path, block, before, names, numeric, kind, example,
                extra_columns=extra_columns, number_error=number_error,
            )  # fmt: skip
            tables = None  # irregular: only the checks go on
        elif tables is not None:
            tables.append(table)
    if tables is None:
        return None
    return pa.concat_tables(tables) if tables else _empty(names, numeric)


_HEAD = 4096


def sniff_delimiter(path: Path) -> tuple[str, int] | None:
    """(the delimiter, the number of cells) of the file's first data line when it has one kind of
    single separator, else None.
    """
    with _open_binary(path) as fh:
        try:
            head = fh.read(_HEAD)
        except (*READ_ERRORS, ValueError):
            return None
    if not head or head.startswith(b"\xef\xbb\xbf"):
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


def _skip_comment(row: pacsv.InvalidRow) -> str:
    """pyarrow's verdict on a row with the wrong number of columns: a comment is skipped."""
    return "skip" if is_comment(row.text) else "error"


def _not_a_number(path: Path, numeric: str) -> NumberCheck:
    def check(cell: str, line: int) -> InputError | None:
        if parses_as_number(cell):
            return None
        return InputError(f"{numeric} {cell!r} is not a number", path=path, line=line)

    return check


def arrow_table(
    block: bytes,
    names: tuple[str, ...],
    numeric: str,
    extra_columns: bool,
    sniffed: tuple[str, int],
    *,
    ids: pa.DataType | None = None,
    chunk: int = _CHUNK,
) -> pa.Table | None:
    """A block of whole lines read by pyarrow when it is regular; None means: check its lines."""
    if not plain_block(block):
        return None  # a NUL byte, or a line over the limit: `check_lines` names it
    id_type = ids or pa.large_string()
    types = {n: id_type if n in _ID_COLUMNS else pa.string() for n in names}
    types[numeric] = pa.float64()
    try:
        table = read_block(block, names, types, sniffed, extra_columns=extra_columns, chunk=chunk)
    except pa.ArrowException:
        return None
    return regular_rows(table, names, numeric)


def read_block(
    block: bytes,
    names: Sequence[str],
    types: dict[str, pa.DataType],
    sniffed: tuple[str, int],
    *,
    extra_columns: bool,
    chunk: int,
    quoted: bool = False,
) -> pa.Table:
    """A block of whole lines of `sniffed` (delimiter, cells per line) read by Arrow into the
    `names` columns typed `types`, in chunks of `chunk` bytes parsed in parallel. Raises
    pa.ArrowException when Arrow cannot take it.
    """
    delimiter, width = sniffed
    columns = list(names)
    if extra_columns and width > len(names):
        columns += [f"extra_{i}" for i in range(width - len(names))]  # read, then dropped
    return pacsv.read_csv(
        pa.BufferReader(block),
        read_options=pacsv.ReadOptions(column_names=columns, block_size=chunk),
        parse_options=pacsv.ParseOptions(
            delimiter=delimiter,
            quote_char='"' if quoted else False,  # the irregular path unquotes
            escape_char=False,
            ignore_empty_lines=True,
            invalid_row_handler=_skip_comment,  # comment lines of another width
        ),
        convert_options=pacsv.ConvertOptions(
            column_types=types,
            include_columns=list(names),
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
            check_utf8=True,
        ),
    )


def regular_rows(rows: pa.Table, names: Sequence[str], numeric: str) -> pa.Table | None:
    """`rows` without `#` comments, or None when a field is empty (a doubled separator: the
    irregular path's business)."""
    comments = pc.starts_with(rows.column(names[0]), "#")  # comments that have the right width
    if rows.num_rows and pc.any(comments).as_py():
        rows = rows.filter(pc.invert(comments))
    if rows.column(numeric).null_count:
        return None  # an empty numeric field
    for name in names:
        if name != numeric and pc.any(pc.equal(rows.column(name), "")).as_py():
            return None  # an empty field: a doubled or trailing delimiter somewhere
    return rows


def _irregular_table(
    path: Path,
    names: tuple[str, ...],
    numeric: str,
    kind: str,
    example: str,
    extra_columns: bool,
) -> pa.Table:
    """The file read block by block with its whitespace normalised, `numeric` as text; a block Arrow
    still rejects names its first bad line (`check_lines`), or the file.
    """
    tables = []
    for before, raw in line_blocks(path, _PARSE_BLOCK):
        block = raw[len(_BOM) :] if not before and raw.startswith(_BOM) else raw
        if not block.strip(b" \t\r\n"):
            continue  # blank lines only: Arrow would call it an empty file
        try:
            tables.append(_irregular_block(block, names, numeric, extra_columns))
        except pa.ArrowException as exc:
            check_lines(
                path, block, before, names, numeric, kind, example,
                extra_columns=extra_columns, number_error=_any_cell,
            )  # fmt: skip
            raise InputError(
                f"cannot parse {kind} file: {str(exc).splitlines()[0][:200]}",
                path=path,
                hint=f"each line must be `{example}`, separated by spaces or tabs",
            ) from None
    return pa.concat_tables(tables) if tables else _empty(names, None)


def _irregular_block(
    block: bytes, names: tuple[str, ...], numeric: str, extra_columns: bool
) -> pa.Table:
    """One normalised block as a table (pa.ArrowException when Arrow cannot take it); a run's lines
    of several widths are cut to their first columns.
    """
    if not plain_block(block):
        raise pa.ArrowInvalid("a NUL byte or an over-long line")
    text = _normalised(block)
    types = dict.fromkeys(names, pa.large_string())

    def read(data: bytes, width: int) -> pa.Table:
        sniffed = (" ", width)
        extra = width > len(names)
        return read_block(
            data, names, types, sniffed, extra_columns=extra, chunk=_CHUNK, quoted=True
        )

    width = max(len(names), _first_width(text)) if extra_columns else len(names)
    try:
        table = read(text, width)
    except pa.ArrowException:
        if not extra_columns:
            raise
        try:  # a quoted cell holding a space, or lines of several widths
            table = read(text, len(names))
        except pa.ArrowException:
            table = read(_FIRST_CELLS[len(names)].sub(rb"\1\2", text), len(names))
    rows = regular_rows(table, names, numeric)
    if rows is None:
        raise pa.ArrowInvalid("an empty field")
    return rows


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
    """The number of cells of the first data line of a normalised block (0 when none)."""
    start = 0
    while start < len(text):
        end = text.find(b"\n", start)
        end = len(text) if end < 0 else end
        line = text[start:end].rstrip(b"\r")
        if line and not line.startswith(b"#"):
            return line.count(b" ") + 1
        start = end + 1
    return 0


def _any_cell(cell: str, line: int) -> InputError | None:
    """The number check of the irregular path: none (the caller checks the column after)."""
    return None


def _empty(names: tuple[str, ...], numeric: str | None) -> pa.Table:
    """The table of a file without data lines."""
    return pa.table(
        {n: pa.array([], pa.float64() if n == numeric else pa.large_string()) for n in names}
    )


def line_of(path: Path, row: int) -> int:
    """File line number of parsed row `row` (re-reads the file: for error messages only)."""
    return lines_of(path, [row])[0]


def lines_of(path: Path, rows: Sequence[int]) -> list[int]:
    """File line numbers of parsed rows `rows`, streaming the file up to the last (for messages)."""
    wanted = set(rows)
    found: dict[int, int] = {}
    row = -1
    for lineno, text in iter_lines(path):
        if text.strip() and not is_comment(text):
            row += 1
            if row in wanted:
                found[row] = lineno
                if len(found) == len(wanted):
                    break
    return [found[r] for r in rows]


def float_column(column: pa.ChunkedArray) -> npt.NDArray[np.float64]:
    """The values as float64, NaN where not a number."""
    if pa.types.is_floating(column.type):
        return np.asarray(column.to_numpy(), dtype=np.float64)
    try:
        values = pc.cast(column, pa.float64()).to_numpy()
    except pa.ArrowException:
        import pandas as pd

        series = pd.Series(column.to_numpy(zero_copy_only=False), dtype=object)
        values = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64)
    return np.asarray(values, dtype=np.float64)
