"""TREC run and qrels files: strict readers and an atomic writer.

`#` comment lines are skipped and run columns after the sixth ignored, as trec_eval 10 reads
them; runs are ranked as trec_eval ranks (score descending, in float32 by default, ties by doc id
descending), never by their rank column."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from grader.errors import InputError
from grader.io.files import atomic_write
from grader.io.grade_format import LARGE_HINT, LARGEST_GRADE, clamp_hint
from grader.io.trec_arrow import (
    QRELS,
    RUN,
    NumberCheck,
    finite_number,
    lines_of,
    parse_columns,
    parses_as_number,
)
from grader.metrics.rank_order import Precision, rank_order, ranks_within

if TYPE_CHECKING:  # pandas (and pydantic, through grader.models) load only where used, so
    import pandas as pd  # `relgrade evaluate` of a small run starts fast


def group_starts(column: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.int64]:
    """Row index where each run of equal values begins."""
    n = len(column)
    if n < 2:
        return np.zeros(min(n, 1), dtype=np.int64)
    change = pc.not_equal(column.slice(1), column.slice(0, n - 1))
    flags = np.asarray(change.to_numpy(zero_copy_only=False), dtype=bool)
    return np.concatenate(([0], np.flatnonzero(flags) + 1)).astype(np.int64)


def query_codes(column: pa.ChunkedArray) -> npt.NDArray[np.int64]:
    """Integer code per row, equal codes for equal query ids (order of first appearance)."""
    starts = group_starts(column)  # runs are grouped by query, unless a query comes back
    if len(pc.unique(column.take(pa.array(starts)))) == len(starts):
        sizes = np.diff(np.append(starts, len(column)))
        return np.repeat(np.arange(len(starts), dtype=np.int64), sizes)
    encoded = pc.dictionary_encode(column)  # its chunks share one dictionary
    chunks = [np.asarray(c.indices.to_numpy(), dtype=np.int64) for c in encoded.chunks]
    return np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.int64)


_HASH_BASE = np.uint64(1099511628211)
_HASH_ROWS = 1 << 20


def string_hashes(column: pa.ChunkedArray) -> npt.NDArray[np.uint64]:
    """A 64-bit polynomial hash of every string, vectorised over the Arrow buffers: equal strings
    hash equal in any chunk (callers confirm matches), in far less memory than a hash table."""
    parts = [_hash_chunk(chunk) for chunk in column.chunks]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64)


def _hash_chunk(arr: pa.Array) -> npt.NDArray[np.uint64]:
    n = len(arr)
    out = np.zeros(n, dtype=np.uint64)
    wide = pa.types.is_large_string(arr.type)
    buffers = arr.buffers()
    if n == 0 or buffers[2] is None:
        return out
    offsets = np.frombuffer(
        buffers[1],
        dtype=np.int64 if wide else np.int32,
        count=n + 1,
        offset=arr.offset * (8 if wide else 4),
    ).astype(np.int64)
    data = np.frombuffer(buffers[2], dtype=np.uint8)
    lengths = np.diff(offsets)
    longest = int(lengths.max())
    powers = np.ones(max(longest, 1), dtype=np.uint64)
    if longest > 1:
        powers[1:] = np.cumprod(np.full(longest - 1, _HASH_BASE, dtype=np.uint64))
    for start in range(0, n, _HASH_ROWS):
        stop = min(start + _HASH_ROWS, n)
        lo, hi = int(offsets[start]), int(offsets[stop])
        if hi == lo:
            continue
        firsts = offsets[start:stop] - lo
        lens = lengths[start:stop]
        pos = np.arange(hi - lo, dtype=np.int64) - np.repeat(firsts, lens)
        terms = data[lo:hi].astype(np.uint64) * powers[pos]
        sums = np.add.reduceat(terms, np.minimum(firsts, hi - lo - 1))
        out[start:stop] = np.where(lens > 0, sums + lens.astype(np.uint64), 0)
    return out


def check_duplicates(
    table: pa.Table,
    qcodes: npt.NDArray[np.int64],
    error: Callable[[str, str, list[int]], InputError],
) -> None:
    """Raise `error(qid, doc_id, [row, row])` at the earliest row repeating a pair before it."""
    key = string_hashes(table["doc_id"]) ^ (
        qcodes.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    )
    ordered = np.sort(key)
    repeated = ordered[1:][ordered[1:] == ordered[:-1]]
    if not len(repeated):
        return
    # the rows whose hashes repeat, in file order, checked on the ids (hashes may collide)
    rows = np.flatnonzero(np.isin(key, repeated))
    taken = pa.array(rows)
    pairs = zip(*(table[c].take(taken).to_pylist() for c in ("query_id", "doc_id")), strict=True)
    seen: dict[tuple[str, str], int] = {}
    for row, pair in zip(rows.tolist(), pairs, strict=True):
        if pair in seen:
            raise error(pair[0], pair[1], [seen[pair], row])
        seen[pair] = row


def _check_duplicates(
    path: Path, table: pa.Table, qcodes: npt.NDArray[np.int64], kind: str
) -> None:
    """Raise naming both lines when the same (query_id, doc_id) appears twice."""

    def lines(qid: str, did: str, rows: list[int]) -> InputError:
        (first, _), (second, _) = lines_of(path, rows)
        return InputError(
            f"query {qid!r} lists doc {did!r} twice, on lines {first} and {second}",
            path=path,
            line=second,
            hint=f"keep one line per (query, doc) in a {kind}",
        )

    check_duplicates(table, qcodes, lines)


def _bad_score(path: Path, cell: object, line: int) -> InputError:
    return InputError(
        f"score {cell!r} is not a finite number",
        path=path,
        line=line,
        hint="the 5th column of a run line is the score, e.g. `q1 Q0 d7 1 12.5 myrun`",
    )


def score_check(path: Path) -> NumberCheck:
    """The score check of a run line, for the bounded-memory search of a bad line."""
    return lambda cell, line: None if finite_number(cell) else _bad_score(path, cell, line)


def read_run(path: str | Path, *, precision: Precision = "float32") -> pd.DataFrame:
    """Read a TREC run into [query_id, doc_id, score, rank], ranked in trec_eval's order (scores
    compared in `precision`); a bad line raises InputError naming file, line and fix."""
    p = Path(path)
    if precision not in ("float32", "float64"):
        raise InputError(f"unknown precision {precision!r}", hint="use float32 or float64")
    table = parse_columns(p, RUN, score_check(p))
    scores = np.asarray(table["score"].to_numpy(), dtype=np.float64)
    if (bad := np.flatnonzero(~np.isfinite(scores))).size:
        line, cell = _written(p, bad, 4)
        raise _bad_score(p, cell, line)
    table = table.select(["query_id", "doc_id", "tag"])  # free the other columns early
    qcodes = query_codes(table["query_id"])
    _check_duplicates(p, table, qcodes, "run")
    frame = ranked_frame(table, qcodes, scores, precision)
    tags = pc.unique(table["tag"])
    frame.attrs["tag"] = str(tags[0].as_py()) if len(tags) == 1 else None
    frame.attrs["path"] = str(p)
    return frame


def ranked_frame(
    table: pa.Table,
    qcodes: npt.NDArray[np.int64],
    scores: npt.NDArray[np.float64],
    precision: Precision,
) -> pd.DataFrame:
    """[query_id, doc_id, score, rank] of a run `table` (`qcodes`: its query codes)."""
    order = rank_order(qcodes, scores, table["doc_id"], precision)
    identity = bool(np.all(order == np.arange(len(order))))
    grouped = identity or bool(np.all(qcodes[order] == qcodes))
    frame: pd.DataFrame = pa.table(  # string columns stay in Arrow memory (pandas' str dtype)
        {
            "query_id": table["query_id"] if grouped else table["query_id"].take(pa.array(order)),
            "doc_id": table["doc_id"] if identity else table["doc_id"].take(pa.array(order)),
            "score": scores[order],
            "rank": ranks_within(qcodes[order]),
        }
    ).to_pandas()
    return frame


def read_qrels(path: str | Path, *, clamp: bool = False, any_grade: bool = False) -> pd.DataFrame:
    """TREC qrels as [query_id, doc_id, grade]: grades in 0..3 (`clamp=True` moves others to the
    nearest end), or with `any_grade=True` every integer as written, as trec_eval reads them."""
    table, clamped = read_qrels_columns(path, clamp=clamp, any_grade=any_grade)
    frame: pd.DataFrame = table.to_pandas()
    frame.attrs.update(path=str(Path(path)), clamped=clamped)
    return frame


def read_qrels_columns(
    path: str | Path, *, clamp: bool = False, any_grade: bool = False
) -> tuple[pa.Table, int]:
    """`read_qrels` as an Arrow table, with the same checks and errors (no pandas), and the
    count of clamped grades."""
    p = Path(path)
    hint = "the 4th column of a qrels line is an integer grade " + (
        "(e.g. -2..4)" if any_grade else "0..3"
    )

    def grade_check(cell: str, line: int) -> InputError | None:
        if parses_as_number(cell) and float(cell).is_integer():
            return None
        return InputError(f"grade {cell!r} is not an integer", path=p, line=line, hint=hint)

    table = parse_columns(p, QRELS, grade_check)
    grades = np.asarray(table["grade"].to_numpy(), dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(grades) | (grades != np.round(grades)))
    if bad.size:
        raise _grade_error(p, bad, "is not an integer", hint)
    if any_grade:
        outside = np.flatnonzero(np.abs(grades) > LARGEST_GRADE)
        if outside.size:
            raise _grade_error(p, outside, "is too large", LARGE_HINT)
        ints = grades.astype(np.int64)
    else:
        from grader.models import MAX_GRADE, MIN_GRADE

        # Range check and clip on the floats: a huge grade cast to int64 first would wrap around.
        outside = np.flatnonzero((grades < MIN_GRADE) | (grades > MAX_GRADE))
        if outside.size and not clamp:
            why = f"is outside {MIN_GRADE}..{MAX_GRADE}"
            raise _grade_error(p, outside, why, clamp_hint())
        ints = np.clip(grades, MIN_GRADE, MAX_GRADE).astype(np.int64)
    _check_duplicates(p, table, query_codes(table["query_id"]), "qrels")
    ids = {"query_id": table["query_id"], "doc_id": table["doc_id"]}
    return pa.table({**ids, "grade": ints}), int(outside.size)


def _written(path: Path, rows: npt.NDArray[np.intp], column: int) -> tuple[int, str]:
    """(file line, cell `column` as written) of the first of parsed `rows`, for an error."""
    ((line, text),) = lines_of(path, [int(rows[0])])
    return line, text.split()[column]


def _grade_error(path: Path, rows: npt.NDArray[np.intp], why: str, hint: str) -> InputError:
    """The error for the grade of the first of `rows`, as written in the file."""
    line, cell = _written(path, rows, 3)
    return InputError(f"grade {cell} {why}", path=path, line=line, hint=hint)


def _check_ids(frame: pd.DataFrame, columns: tuple[str, ...], path: Path) -> None:
    import pandas as pd

    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(
            f"the table lacks the column(s) {', '.join(missing)}",
            path=path,
            hint=f"pass a table with {', '.join(columns)}",
        )
    for col in ("query_id", "doc_id"):
        uniques = pd.Series(pd.unique(frame[col].astype(str)), dtype=str)
        bad = uniques[uniques.str.contains(r"\s", regex=True) | (uniques == "")]
        if len(bad):
            raise InputError(
                f"{col} {bad.iat[0]!r} is empty or contains whitespace",
                path=path,
                hint="TREC files are whitespace separated; ids must be single non-empty words",
            )


def write_qrels(path: str | Path, frame: pd.DataFrame) -> None:
    """Write [query_id, doc_id, grade] as TREC qrels (`qid 0 docid grade`), atomically."""
    import pandas as pd

    from grader.models import MAX_GRADE, MIN_GRADE

    p = Path(path)
    _check_ids(frame, ("query_id", "doc_id", "grade"), p)
    grades = pd.to_numeric(frame["grade"], errors="coerce")
    if grades.isna().any() or (grades != grades.round()).any():
        raise InputError("grades must be integers", path=p, hint="drop or fix missing grades")
    if ((grades < MIN_GRADE) | (grades > MAX_GRADE)).any():
        raise InputError(
            f"grades must be in {MIN_GRADE}..{MAX_GRADE}", path=p, hint="fix or clamp them first"
        )
    out = pd.DataFrame(
        {
            "query_id": frame["query_id"].astype(str),
            "iteration": "0",
            "doc_id": frame["doc_id"].astype(str),
            "grade": grades.astype(np.int64),
        }
    )
    with atomic_write(p) as fh:
        out.to_csv(fh, sep=" ", header=False, index=False, lineterminator="\n")
