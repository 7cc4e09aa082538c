"""Small TREC files read in plain Python, without importing Arrow (`grader.io` says why).

Only files the Arrow readers read exactly alike are taken (UTF-8, one kind of separator, no `"`,
numbers both parse alike, no (query, doc) twice); for any other the functions return None and
the Arrow reader reads it or names the error (tests/test_trec_small_random.py)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import numpy.typing as npt

from grader.errors import InputError
from grader.io.grade_format import LARGEST_GRADE
from grader.io.spool import open_binary
from grader.io.streams import TREC_LINE_LIMIT
from grader.metrics.join_dicts import DictJudgments, dict_judgments, query_codes
from grader.metrics.judged_rows import Int, JudgedRun
from grader.metrics.rank_order import Precision

SMALL_BYTES = 4 << 20
"""The largest file (its text, after gunzip) read here; larger ones go to the Arrow readers."""

_NOT_TAKEN = (b"\x00", b"\r", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e", b"\x1f", b'"')
_OTHER_SPACE = re.compile(r"[^\S \t\n]")  # whitespace Python's str methods see, the readers not


def small_bytes(path: Path) -> bytes | None:
    """The bytes of `path` (gunzipped, `\\r\\n` as `\\n`, ending in a newline) when it is at most
    SMALL_BYTES and this module takes it, else None."""
    limit = SMALL_BYTES
    try:
        with open_binary(path) as fh:
            data = fh.read(limit + 1)
    except (InputError, OSError, EOFError):  # gzip.BadGzipFile is an OSError
        return None  # the Arrow reader says what is wrong
    if len(data) > limit or (len(data) > TREC_LINE_LIMIT and _longest_line(data) > TREC_LINE_LIMIT):
        return None  # too large here, or a line over the limit (the Arrow reader names it)
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n")
    if any(c in data for c in _NOT_TAKEN) or (b" " in data and b"\t" in data):
        return None
    if not data.isascii():
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if text.startswith("\ufeff") or _OTHER_SPACE.search(text):
            return None  # a byte order mark, or a space str.lstrip() sees in a comment test
    return data if data.endswith(b"\n") or not data else data + b"\n"


def _longest_line(data: bytes) -> int:
    """The length of the longest line of `data` (its newline included)."""
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
    return int(np.diff(ends, prepend=-1, append=len(data)).max())


def _table(
    path: str | Path, width: int, number: int, *, extra: bool
) -> tuple[list[bytes], Int, list[bytes], npt.NDArray[np.float64]] | None:
    """(query ids in order of first appearance, each line's query code, doc ids, the numbers of
    column `number`) of a file taken here; None when not taken, a line has other than `width`
    cells (more with `extra`) or a number is not one."""
    data = small_bytes(Path(path))
    if data is None:
        return None
    try:
        if (regular := _regular_cells(data)) is None:
            queries, docs, cells = _split_lines(data, width, (0, 2, number), extra=extra)
            return (*query_codes(queries), docs, parse_cells(cells))
        starts, ends = regular
        found = starts.shape[1]
        if found != width and not (extra and found > width):
            return None
        grouped = _query_groups(data, starts[:, 0], ends[:, 0])
        if grouped is None:
            grouped = query_codes(_cut(data, starts[:, 0], ends[:, 0]))
        docs = _cut(data, starts[:, 2], ends[:, 2])
        return (*grouped, docs, parse_decimals(data, starts[:, number], ends[:, number]))
    except ValueError:
        return None


def _split_lines(
    data: bytes, width: int, wanted: tuple[int, ...], *, extra: bool
) -> list[list[bytes]]:
    """`_table`'s columns of a file with comments, blank lines or irregular separators."""
    out: list[list[bytes]] = [[] for _ in wanted]
    for line in data.split(b"\n"):
        row = line.split()
        if not row or row[0].startswith(b"#"):
            continue
        if len(row) != width and not (extra and len(row) > width):
            raise ValueError("a line with other columns")
        for column, index in zip(out, wanted, strict=True):
            column.append(row[index])
    return out


def _regular_cells(data: bytes) -> tuple[Int, Int] | None:
    """(start, end) offsets of every cell, one row per line, when every line has the same cells
    separated by one space or one tab (no blank, comment or empty cell), else None."""
    if not data:
        return None
    b = np.frombuffer(data, dtype=np.uint8)
    sep = 9 if b"\t" in data else 32
    seps = np.flatnonzero((b == sep) | (b == 10))
    if seps[0] == 0 or (np.diff(seps) == 1).any():
        return None  # an empty cell or line
    newline = b[seps] == 10
    width = int(np.argmax(newline)) + 1
    lines = len(seps) // width
    if len(seps) != lines * width or int(newline.sum()) != lines:
        return None  # lines of other widths
    if not newline[width - 1 :: width].all():
        return None  # lines of other widths, the same number of cells in all
    ends = seps.reshape(lines, width)
    starts = np.empty_like(ends)
    starts[:, 1:] = ends[:, :-1] + 1
    starts[0, 0] = 0
    starts[1:, 0] = ends[:-1, -1] + 1
    if (b[starts[:, 0]] == ord("#")).any():
        return None  # a comment
    return starts, ends


def _cut(data: bytes, starts: Int, ends: Int) -> list[bytes]:
    return [data[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]


_LONGEST_COMPARED = 64


def _query_groups(data: bytes, starts: Int, ends: Int) -> tuple[list[bytes], Int] | None:
    """`query_codes` of the ids at these offsets when each id's lines are together (compared byte by
    byte in numpy); None when an id comes back or ids are over _LONGEST_COMPARED bytes."""
    lengths = ends - starts
    longest = int(lengths.max())
    if longest > _LONGEST_COMPARED:
        return None
    b = np.frombuffer(data, dtype=np.uint8)
    last = len(b) - 1
    same = lengths[1:] == lengths[:-1]
    for k in range(longest):
        here = b[np.minimum(starts[1:] + k, last)] == b[np.minimum(starts[:-1] + k, last)]
        same &= here | (lengths[1:] <= k)
    first = np.flatnonzero(np.concatenate(([True], ~same)))
    heads = _cut(data, starts[first], ends[first])
    if len(set(heads)) != len(heads):
        return None
    sizes = np.diff(np.append(first, len(starts)))
    return heads, np.repeat(np.arange(len(heads), dtype=np.int64), sizes)


def small_qrels(path: str | Path) -> DictJudgments | None:
    """TREC qrels as `read_qrels_columns(path, any_grade=True)`, indexed; None if not taken here."""
    table = _table(path, 4, 3, extra=False)
    if table is None:
        return None
    heads, qcodes, docs, numbers = table
    if not (np.abs(numbers) <= LARGEST_GRADE).all() or (numbers != np.round(numbers)).any():
        return None  # not an integer, or too large to hold exactly (nan and inf too)
    try:
        return dict_judgments(heads, qcodes, docs, numbers.astype(np.int64))
    except InputError:
        return None  # a (query, doc) twice: the Arrow reader names both lines


def small_judged_run(
    path: str | Path,
    judged: DictJudgments,
    *,
    precision: Precision = "float32",
    depth: int | None = None,
) -> JudgedRun | None:
    """The run at `path` joined with `judged`, as `judged_run` gives it; None if not taken here."""
    table = _table(path, 6, 4, extra=True)
    if table is None or not np.isfinite(table[3]).all():
        return None
    heads, qcodes, docs, scores = table
    try:
        ranked = judged.join(heads, qcodes, docs, scores, precision=precision, depth=depth)
    except InputError:
        return None  # a (query, doc) twice: the Arrow reader names both lines
    return JudgedRun(ranked, len(docs))


MAX_DIGITS = 15
"""Digits of the numbers parsed in numpy, as float() parses them: a mantissa of 15 digits and a
power of ten are exact doubles, so one IEEE division gives float()'s value (Clinger's fast path)."""

_POW10_FLOAT = np.array([float(10**k) for k in range(MAX_DIGITS + 1)])  # exact doubles
_ZERO, _DOT, _MINUS, _PLUS = ord("0"), ord("."), ord("-"), ord("+")


def parse_decimals(
    data: bytes, starts: npt.NDArray[np.int64], ends: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """`float(data[starts[i]:ends[i]])` of every cell; ValueError for one `_slow` refuses."""
    n = len(starts)
    if not n:
        return np.empty(0, dtype=np.float64)
    buffer = np.frombuffer(data, dtype=np.uint8)
    last = len(buffer) - 1
    first = buffer[np.minimum(starts, last)]
    negative = first == _MINUS
    at = starts + (negative | (first == _PLUS))  # after the sign
    mantissa = np.zeros(n, dtype=np.int64)
    digits = np.zeros(n, dtype=np.int64)
    fraction = np.zeros(n, dtype=np.int64)  # digits after the dot
    dotted = np.zeros(n, dtype=bool)
    fast = ends - at <= MAX_DIGITS + 1  # the digits and a dot
    for k in range(int((ends - at).max()) if fast.any() else 0):
        where = at + k
        inside = fast & (where < ends)
        byte = buffer[np.minimum(where, last)]
        digit = inside & (byte - _ZERO <= 9)  # uint8: a byte below "0" wraps above 9
        dot = inside & (byte == _DOT)
        fast &= ~inside | digit | (dot & ~dotted)
        mantissa = np.where(digit, mantissa * 10 + (byte - _ZERO), mantissa)
        digits += digit
        fraction += digit & dotted
        dotted |= dot
    fast &= (digits >= 1) & (digits <= MAX_DIGITS)
    values = mantissa.astype(np.float64) / _POW10_FLOAT[np.minimum(fraction, MAX_DIGITS)]
    out: npt.NDArray[np.float64] = np.where(negative, -values, values)
    for row in np.flatnonzero(~fast).tolist():
        out[row] = _slow(data[starts[row] : ends[row]])
    return out


def parse_cells(cells: list[bytes]) -> npt.NDArray[np.float64]:
    """`parse_decimals` of cells already cut (a file read line by line)."""
    return np.fromiter(map(_slow, cells), dtype=np.float64, count=len(cells))


def _slow(cell: bytes) -> float:
    if not cell.isascii() or b"_" in cell:
        raise ValueError(f"not a number the readers take: {cell!r}")
    return float(cell)
