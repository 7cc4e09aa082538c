"""Tokenising whitespace-separated TREC files into Arrow columns, fast and with exact errors.

The fast path is pyarrow's multi-threaded CSV reader with the file's single delimiter, ids as
large strings and the numeric column parsed to float64 in C++, fed blocks of 16 MiB of whole
lines (`trec_scan.line_blocks`). A block it rejects has its lines checked at once, so a bad line
is named (file and line) as soon as its block is read, in that block's memory. A file with no
bad line that Arrow still cannot take (mixed or repeated whitespace, a BOM) goes through pandas'
C tokenizer, which splits on any whitespace. So regular files are read at Arrow speed and
irregular ones still read, or fail with file, line and fix.

Both paths read files as trec_eval 10 does: a line whose first non-blank character is `#` is a
comment and skipped, and (for runs, `extra_columns=True`) the columns after the expected ones
are ignored. A line with fewer columns stays an error naming file and line.
"""

from __future__ import annotations

import io
import re
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from grader.errors import InputError
from grader.io.files import _open_binary, iter_lines
from grader.io.streams import READ_ERRORS
from grader.io.trec_scan import (
    TREC_LINE_LIMIT,
    NumberCheck,
    check_lines,
    check_text_head,
    first_bad_line,
    line_blocks,
    parses_as_number,
    plain_block,
)

if TYPE_CHECKING:  # the careful reader's pandas loads only when a file needs it
    import pandas as pd

_FIELDS_RE = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")
_ID_COLUMNS = ("query_id", "doc_id")
_COMMENT_LINES = re.compile(rb"^(?:\xef\xbb\xbf)?[ \t]*#[^\r\n]*", re.MULTILINE)
_Rows = TypeVar("_Rows", pa.Table, pa.RecordBatch)


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
    """The file as an Arrow table: ids as large strings, `numeric` as float64 when parseable.

    On the careful path `numeric` stays a string column (so the caller can name a bad value);
    every other column is a string column in both paths. `#` comment lines are skipped; with
    `extra_columns`, columns after `names` are ignored (else they are an error).

    When the fast path rejects a file, its first bad line is looked for in bounded memory
    (`trec_scan`): a wrong column count, bad UTF-8, or a `numeric` cell `number_error` refuses
    (default: not a number) raises there; only a file with no bad line is read by pandas.
    """
    check_text_head(path, kind)  # a binary file is "not UTF-8", not a column count
    sniffed = _sniff_delimiter(path)
    table = None
    if sniffed is not None:
        number_error = number_error or _not_a_number(path, numeric)
        table = _arrow_blocks(
            path, names, numeric, kind, example, sniffed,
            extra_columns=extra_columns, number_error=number_error,
        )  # fmt: skip
        if table is None:  # an irregular block: is a later line bad?
            first_bad_line(
                path, _block_check(names, numeric, extra_columns, sniffed),
                names, numeric, kind, example,
                extra_columns=extra_columns, number_error=number_error,
            )  # fmt: skip
    if table is None:
        frame = _parse_pandas(path, names, kind, example, extra_columns)
        table = pa.table(
            {n: pa.array(frame[n].to_numpy(dtype=object), pa.large_string()) for n in names}
        )
    return table


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
    """The file read by Arrow block by block. A block Arrow rejects has its lines checked at
    once, and the first bad one raises (file and line, in that block's memory); None when it
    holds no bad line (irregular whitespace: the careful path's business)."""
    tables = []
    for before, block in line_blocks(path, _PARSE_BLOCK):
        table = _arrow_table(block, names, numeric, extra_columns, sniffed)
        if table is None:
            check_lines(
                path, block, before, names, numeric, kind, example,
                extra_columns=extra_columns, number_error=number_error,
            )  # fmt: skip
            return None
        tables.append(table)
    return pa.concat_tables(tables) if tables else None


def _block_check(
    names: tuple[str, ...], numeric: str, extra_columns: bool, sniffed: tuple[str, int]
) -> Callable[[bytes], bool]:
    """Whether Arrow's fast path takes a block of whole lines as it is."""
    return lambda block: _arrow_table(block, names, numeric, extra_columns, sniffed) is not None


_HEAD = 4096


def _sniff_delimiter(path: Path) -> tuple[str, int] | None:
    """(the single delimiter, the number of cells) of the file's first line that is neither blank
    nor a comment, or None when it is not that simple."""
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


def _arrow_table(
    block: bytes,
    names: tuple[str, ...],
    numeric: str,
    extra_columns: bool,
    sniffed: tuple[str, int],
) -> pa.Table | None:
    """A block of whole lines read by pyarrow when it is regular; None means: check its lines
    (and maybe use the careful path)."""
    if not plain_block(block):
        return None  # a NUL byte, or a line over the limit: `check_lines` names it
    delimiter, width = sniffed
    columns = list(names)
    if extra_columns and width > len(names):
        columns += [f"extra_{i}" for i in range(width - len(names))]  # read, then dropped
    types = {n: pa.large_string() if n in _ID_COLUMNS else pa.string() for n in names}
    types[numeric] = pa.float64()
    try:
        table = pacsv.read_csv(
            pa.BufferReader(block),
            read_options=pacsv.ReadOptions(column_names=columns, block_size=_CHUNK),
            parse_options=parse_options(delimiter),
            convert_options=convert_options(names, types),
        )
    except pa.ArrowException:
        return None
    return regular_rows(table, names, numeric)


def parse_options(delimiter: str) -> pacsv.ParseOptions:
    """How Arrow splits a TREC file on its one `delimiter` (both fast readers: this and
    `run_stream`): no quoting, blank lines skipped, comment lines of the wrong width skipped."""
    return pacsv.ParseOptions(
        delimiter=delimiter,
        quote_char=False,
        escape_char=False,
        ignore_empty_lines=True,
        invalid_row_handler=_skip_comment,
    )


def convert_options(names: Sequence[str], types: dict[str, pa.DataType]) -> pacsv.ConvertOptions:
    """Arrow's typing of the `names` columns (later columns dropped): no null strings, UTF-8."""
    return pacsv.ConvertOptions(
        column_types=types,
        include_columns=list(names),
        strings_can_be_null=False,
        quoted_strings_can_be_null=False,
        check_utf8=True,
    )


def regular_rows(rows: _Rows, names: Sequence[str], numeric: str) -> _Rows | None:
    """`rows` (a table or a block of one) without `#` comments of the right width, or None
    when a field is empty (the careful path's business)."""
    comments = pc.starts_with(rows.column(names[0]), "#")  # comments that have the right width
    if rows.num_rows and pc.any(comments).as_py():
        rows = rows.filter(pc.invert(comments))
    if rows.column(numeric).null_count:
        return None  # an empty numeric field
    for name in names:
        if name != numeric and pc.any(pc.equal(rows.column(name), "")).as_py():
            return None  # an empty field: a doubled or trailing delimiter somewhere
    return rows


def _without_comments(fh: IO[bytes]) -> IO[bytes]:
    """The file's bytes with every comment line emptied (line numbers stay those of the file)."""
    data = fh.read()
    return io.BytesIO(_COMMENT_LINES.sub(b"", data) if b"#" in data else data)


def _parse_pandas(
    path: Path, names: tuple[str, ...], kind: str, example: str, extra_columns: bool
) -> pd.DataFrame:
    """The careful reader: any whitespace, exact line numbers for every structural error."""
    import pandas as pd

    hint = f"each line must be `{example}`, separated by spaces or tabs"
    try:
        with _open_binary(path) as fh, warnings.catch_warnings():
            # pandas only warns when the first line has extra columns: make that an error too
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = pd.read_csv(
                _without_comments(fh),
                sep=r"\s+",
                header=None,
                names=list(names),
                dtype=dict.fromkeys(names, str),
                na_filter=False,  # "NA" or "nan" is a valid doc id, never a missing value
                engine="c",
                encoding="utf-8",
                skip_blank_lines=True,
                index_col=False,
                usecols=list(names) if extra_columns else None,  # later columns ignored
            )
    except pd.errors.EmptyDataError:
        return pd.DataFrame({name: pd.Series([], dtype=str) for name in names})
    except pd.errors.ParserError as exc:
        match = _FIELDS_RE.search(str(exc))
        if match:
            raise InputError(
                f"expected {len(names)} columns in a {kind} line, found {match.group(3)}",
                path=path,
                line=int(match.group(2)),
                hint=hint,
            ) from None
        for lineno, text in iter_lines(path):  # e.g. a short first line under `usecols`
            found = len(text.split())
            too_few = 0 < found < len(names)
            if (too_few or (found > len(names) and not extra_columns)) and not is_comment(text):
                raise InputError(
                    f"expected {len(names)} columns in a {kind} line, found {found}",
                    path=path,
                    line=lineno,
                    hint=hint,
                ) from None
        raise InputError(f"cannot parse {kind} file: {exc}", path=path) from None
    except pd.errors.ParserWarning:
        for lineno, text in iter_lines(path):
            found = len(text.split())
            if found > len(names) and not is_comment(text):
                raise InputError(
                    f"expected {len(names)} columns in a {kind} line, found {found}",
                    path=path,
                    line=lineno,
                    hint=hint,
                ) from None
        raise
    except UnicodeDecodeError:
        for _ in iter_lines(path):  # names the line of the first bad byte
            pass
        raise InputError("not valid UTF-8", path=path, hint="re-encode the file as UTF-8") from None
    except READ_ERRORS as exc:
        raise InputError(f"cannot read: {exc}", path=path) from None
    short = np.flatnonzero((frame[names[-1]] == "").to_numpy())
    if short.size:
        row = int(short[0])
        found = int((frame.iloc[row] != "").sum())
        raise InputError(
            f"expected {len(names)} columns in a {kind} line, found {found}",
            path=path,
            line=line_of(path, row),
            hint=hint,
        )
    return frame


def line_of(path: Path, row: int) -> int:
    """File line number of parsed row `row` (re-reads the file: for error messages only)."""
    return lines_of(path, [row])[0]


def lines_of(path: Path, rows: Sequence[int]) -> list[int]:
    """File line numbers of parsed rows `rows`, streaming the file up to the last of them (for
    error messages: nothing is kept but the answers)."""
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


def float_column(column: pa.ChunkedArray) -> tuple[npt.NDArray[np.float64], pa.ChunkedArray]:
    """(values as float64 with NaN where not a number, the column's text for messages)."""
    if pa.types.is_floating(column.type):
        return np.asarray(column.to_numpy(), dtype=np.float64), column
    try:
        values = pc.cast(column, pa.float64()).to_numpy()
    except pa.ArrowException:
        import pandas as pd

        series = pd.Series(column.to_numpy(zero_copy_only=False), dtype=object)
        values = pd.to_numeric(series, errors="coerce").to_numpy(dtype=np.float64)
    return np.asarray(values, dtype=np.float64), column
