"""TREC run and qrels files: fast, strict readers and atomic writers.

Runs are `qid Q0 docid rank score tag`; qrels are `qid iter docid grade`, whitespace separated,
`.gz` transparent. Parsing is done by pandas' C tokenizer and every check is vectorised, so a
10-million-line run reads in seconds; the slow path (re-reading the file line by line) runs only
to name the exact line of an error.

The rank column of a run is never trusted: `rank` is recomputed the way trec_eval orders a
ranking, by score descending with ties broken by doc id descending. Scores are compared in
float32 by default (trec_eval 9 and pytrec_eval store scores as C floats, so scores equal in
float32 are ties); `precision="float64"` compares in double precision (trec_eval 10).
"""

from __future__ import annotations

import gzip
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from grader.errors import InputError
from grader.io.files import _open_binary, atomic_write, iter_lines
from grader.metrics.ranking import Precision, rank_order, ranks_within

RUN_COLUMNS = ("query_id", "q0", "doc_id", "file_rank", "score", "tag")
QRELS_COLUMNS = ("query_id", "iteration", "doc_id", "grade")
MIN_GRADE = 0
MAX_GRADE = 3

_FIELDS_RE = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")


def _parse(path: Path, names: tuple[str, ...], kind: str, example: str) -> pd.DataFrame:
    """Tokenise a whitespace-separated file into string columns (numbers converted later).

    The fast path is pyarrow's multi-threaded CSV reader with a single-character delimiter; any
    file it cannot take as is (mixed or repeated whitespace, bad bytes, wrong column counts, a
    BOM) goes through pandas' C tokenizer, which splits on any whitespace and names bad lines.
    """
    fast = _parse_arrow(path, names)
    if fast is not None:
        return fast
    return _parse_pandas(path, names, kind, example)


def _sniff_delimiter(path: Path) -> str | None:
    """The single delimiter of the file's first line, or None when it is not that simple."""
    with _open_binary(path) as fh:
        try:
            head = fh.read(4096)
        except (OSError, EOFError, gzip.BadGzipFile):
            return None
    if not head or head.startswith(b"\xef\xbb\xbf"):
        return None
    first = head.split(b"\n", 1)[0].rstrip(b"\r")
    for delim in (b" ", b"\t"):
        other = b"\t" if delim == b" " else b" "
        if delim in first and other not in first and delim + delim not in first:
            if first.startswith(delim) or first.endswith(delim):
                return None
            return delim.decode()
    return None


def _parse_arrow(path: Path, names: tuple[str, ...]) -> pd.DataFrame | None:
    """Read with pyarrow when the file is regular; None means: use the careful path."""
    delimiter = _sniff_delimiter(path)
    if delimiter is None:
        return None
    try:
        table = pacsv.read_csv(
            path,
            read_options=pacsv.ReadOptions(column_names=list(names), block_size=1 << 24),
            parse_options=pacsv.ParseOptions(
                delimiter=delimiter, quote_char=False, escape_char=False, ignore_empty_lines=True
            ),
            convert_options=pacsv.ConvertOptions(
                column_types=dict.fromkeys(names, pa.string()),
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
                check_utf8=True,
            ),
        )
    except (pa.ArrowException, OSError, EOFError, gzip.BadGzipFile):
        return None
    if any(pc.any(pc.equal(table[name], "")).as_py() for name in names):
        return None  # an empty field: doubled or trailing delimiter somewhere
    frame: pd.DataFrame = table.to_pandas()
    return frame


def _parse_pandas(path: Path, names: tuple[str, ...], kind: str, example: str) -> pd.DataFrame:
    """The careful reader: any whitespace, exact line numbers for every structural error."""
    dtypes = dict.fromkeys(names, str)
    try:
        with _open_binary(path) as fh, warnings.catch_warnings():
            # pandas only warns when the first line has extra columns: make that an error too
            warnings.simplefilter("error", pd.errors.ParserWarning)
            frame = pd.read_csv(
                fh,
                sep=r"\s+",
                header=None,
                names=list(names),
                dtype=dtypes,
                na_filter=False,  # "NA" or "nan" is a valid doc id, never a missing value
                engine="c",
                encoding="utf-8",
                skip_blank_lines=True,
                index_col=False,
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
                hint=f"each line must be `{example}`, separated by spaces or tabs",
            ) from None
        raise InputError(f"cannot parse {kind} file: {exc}", path=path) from None
    except pd.errors.ParserWarning:
        for lineno, text in iter_lines(path):
            found = len(text.split())
            if found > len(names):
                raise InputError(
                    f"expected {len(names)} columns in a {kind} line, found {found}",
                    path=path,
                    line=lineno,
                    hint=f"each line must be `{example}`, separated by spaces or tabs",
                ) from None
        raise
    except UnicodeDecodeError:
        for _ in iter_lines(path):  # names the line of the first bad byte
            pass
        raise InputError("not valid UTF-8", path=path, hint="re-encode the file as UTF-8") from None
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise InputError(f"cannot read: {exc}", path=path) from None
    last = names[-1]
    short = np.flatnonzero((frame[last] == "").to_numpy())
    if short.size:
        row = int(short[0])
        found = int((frame.iloc[row] != "").sum())
        raise InputError(
            f"expected {len(names)} columns in a {kind} line, found {found}",
            path=path,
            line=_line_of(path, row),
            hint=f"each line must be `{example}`, separated by spaces or tabs",
        )
    return frame


def _line_numbers(path: Path) -> list[int]:
    """File line number of each parsed row (blank lines are skipped by the parser)."""
    return [lineno for lineno, text in iter_lines(path) if text.strip()]


def _line_of(path: Path, row: int) -> int:
    return _line_numbers(path)[row]


def _arrow_strings(series: pd.Series) -> pa.Array:
    """The column as one contiguous Arrow string array (zero-copy when already Arrow-backed)."""
    arr = series.array
    out = arr.__arrow_array__() if hasattr(arr, "__arrow_array__") else pa.array(arr, pa.string())
    if isinstance(out, pa.ChunkedArray):
        out = out.combine_chunks() if out.num_chunks != 1 else out.chunk(0)
    return out


_HASH_BASE = np.uint64(1099511628211)
_HASH_CHUNK = 1 << 20


def string_hashes(series: pd.Series) -> np.ndarray:
    """A 64-bit polynomial hash of every string, vectorised over the Arrow buffers.

    Equal strings always hash equal; callers that need exactness confirm hash matches on the
    strings themselves. Hashing 10M ids costs about as much as one pass over their bytes, far
    less than building a 10M-entry dictionary.
    """
    arr = _arrow_strings(series)
    n = len(arr)
    out = np.zeros(n, dtype=np.uint64)
    if n == 0:
        return out
    wide = pa.types.is_large_string(arr.type)
    offset_type = np.int64 if wide else np.int32
    width = 8 if wide else 4
    buffers = arr.buffers()
    offsets = np.frombuffer(
        buffers[1], dtype=offset_type, count=n + 1, offset=arr.offset * width
    ).astype(np.int64)
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0)
    lengths = np.diff(offsets)
    longest = int(lengths.max()) if n else 0
    powers = np.ones(max(longest, 1), dtype=np.uint64)
    if longest > 1:
        powers[1:] = np.cumprod(np.full(longest - 1, _HASH_BASE, dtype=np.uint64))
    for start in range(0, n, _HASH_CHUNK):
        stop = min(start + _HASH_CHUNK, n)
        lo, hi = int(offsets[start]), int(offsets[stop])
        firsts = offsets[start:stop] - lo
        lens = lengths[start:stop]
        if hi == lo:
            continue
        pos = np.arange(hi - lo, dtype=np.int64) - np.repeat(firsts, lens)
        terms = data[lo:hi].astype(np.uint64) * powers[pos]
        nonempty = lens > 0
        sums = np.add.reduceat(terms, np.minimum(firsts, hi - lo - 1))
        out[start:stop] = np.where(nonempty, sums + lens.astype(np.uint64), 0)
    return out


def _check_duplicates(path: Path, frame: pd.DataFrame, qcodes: np.ndarray, kind: str) -> None:
    """Raise naming both lines when the same (query_id, doc_id) appears twice."""
    key = string_hashes(frame["doc_id"]) ^ (
        qcodes.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    )
    ordered = np.sort(key)
    if not bool(np.any(ordered[1:] == ordered[:-1])):
        return
    rows = np.flatnonzero(pd.Series(key).duplicated(keep=False).to_numpy())
    sub = frame.iloc[rows]
    exact = sub.duplicated(["query_id", "doc_id"], keep=False).to_numpy()
    rows = rows[exact]
    if rows.size == 0:
        return  # only hash collisions between different ids
    qid, did = frame["query_id"].iat[int(rows[0])], frame["doc_id"].iat[int(rows[0])]
    same = (frame["query_id"].iloc[rows] == qid).to_numpy() & (
        frame["doc_id"].iloc[rows] == did
    ).to_numpy()
    pair = rows[same][:2]
    lines = _line_numbers(path)
    first, second = lines[int(pair[0])], lines[int(pair[1])]
    raise InputError(
        f"query {qid!r} lists doc {did!r} twice, on lines {first} and {second}",
        path=path,
        line=second,
        hint=f"keep one line per (query, doc) in a {kind}",
    )


def _numeric(column: pd.Series) -> np.ndarray:
    """Parse a string column as float64 (NaN where not a number), fast when all are numbers."""
    try:
        return np.asarray(
            pc.cast(_arrow_strings(column), pa.float64()).to_numpy(zero_copy_only=False),
            dtype=np.float64,
        )
    except pa.ArrowException:
        return pd.to_numeric(column, errors="coerce").to_numpy(dtype=np.float64)


def _numeric_scores(path: Path, frame: pd.DataFrame) -> np.ndarray:
    scores = _numeric(frame["score"])
    bad = np.flatnonzero(~np.isfinite(scores))
    if bad.size:
        row = int(bad[0])
        raise InputError(
            f"score {frame['score'].iat[row]!r} is not a finite number",
            path=path,
            line=_line_of(path, row),
            hint="the 5th column of a run line is the score, e.g. `q1 Q0 d7 1 12.5 myrun`",
        )
    return scores


def read_run(path: str | Path, *, precision: Precision = "float32") -> pd.DataFrame:
    """Read a TREC run into [query_id, doc_id, score, rank], sorted by query then rank.

    `rank` is 1-based and recomputed in trec_eval's order (score descending in `precision`,
    ties by doc id descending); the file's rank column is ignored.
    Raises InputError (file, line, fix) on a malformed line, a non-numeric score, a duplicate
    (query, doc) (naming both lines) or bytes that are not UTF-8.
    """
    p = Path(path)
    if precision not in ("float32", "float64"):
        raise InputError(f"unknown precision {precision!r}", hint="use float32 or float64")
    raw = _parse(p, RUN_COLUMNS, "run", "qid Q0 docid rank score tag")
    scores = _numeric_scores(p, raw)
    qcodes, _ = pd.factorize(raw["query_id"])
    _check_duplicates(p, raw, qcodes, "run")
    order = rank_order(qcodes, scores, raw["doc_id"], precision)
    frame = pd.DataFrame(
        {
            "query_id": _take(raw["query_id"], order),
            "doc_id": _take(raw["doc_id"], order),
            "score": scores[order],
            "rank": ranks_within(qcodes[order]),
        }
    )
    tags = raw["tag"].unique()
    frame.attrs["tag"] = str(tags[0]) if len(tags) == 1 else None
    frame.attrs["path"] = str(p)
    return frame


def _take(column: pd.Series, order: np.ndarray) -> pd.Series:
    """The column's values in `order` as a fresh str Series with a 0..n-1 index."""
    values = column.astype(str)
    if len(order) == len(values) and bool(np.all(order[1:] > order[:-1])):
        return values.reset_index(drop=True)
    return values.take(order).reset_index(drop=True)


def read_qrels(path: str | Path, *, clamp: bool = False) -> pd.DataFrame:
    """Read TREC qrels into [query_id, doc_id, grade] (grade an int in 0..3).

    A grade outside 0..3 is an InputError unless `clamp=True`, which moves it to the nearest end
    (e.g. -1 -> 0, 4 -> 3). A non-integer grade, a malformed line, a duplicate (query, doc)
    (naming both lines) or non-UTF-8 bytes raise InputError naming the file and line.
    """
    p = Path(path)
    raw = _parse(p, QRELS_COLUMNS, "qrels", "qid 0 docid grade")
    text = raw["grade"]
    grades = _numeric(text)
    bad = np.flatnonzero(~np.isfinite(grades) | (grades != np.round(grades)))
    if bad.size:
        row = int(bad[0])
        raise InputError(
            f"grade {text.iat[row]!r} is not an integer",
            path=p,
            line=_line_of(p, row),
            hint="the 4th column of a qrels line is an integer grade 0..3",
        )
    ints = grades.astype(np.int64)
    outside = np.flatnonzero((ints < MIN_GRADE) | (ints > MAX_GRADE))
    if outside.size and not clamp:
        row = int(outside[0])
        raise InputError(
            f"grade {int(ints[row])} is outside {MIN_GRADE}..{MAX_GRADE}",
            path=p,
            line=_line_of(p, row),
            hint="fix the grade, or pass --clamp to move it to the nearest of 0 and 3",
        )
    if outside.size:
        ints = np.clip(ints, MIN_GRADE, MAX_GRADE)
    _check_duplicates(p, raw, pd.factorize(raw["query_id"])[0], "qrels")
    frame = pd.DataFrame(
        {
            "query_id": raw["query_id"].astype(str),
            "doc_id": raw["doc_id"].astype(str),
            "grade": ints,
        }
    )
    frame.attrs["path"] = str(p)
    frame.attrs["clamped"] = int(outside.size) if clamp else 0
    return frame


def _check_ids(frame: pd.DataFrame, columns: tuple[str, ...], path: Path) -> None:
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
    p = Path(path)
    _check_ids(frame, ("query_id", "doc_id", "grade"), p)
    grades = pd.to_numeric(frame["grade"], errors="coerce")
    if grades.isna().any() or (grades != grades.round()).any():
        raise InputError("grades must be integers", path=p, hint="drop or fix missing grades")
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


def write_run(path: str | Path, frame: pd.DataFrame, tag: str) -> None:
    """Write [query_id, doc_id, score] (rank optional) as a TREC run, atomically.

    Rows are written per query in trec_eval's order (score descending, ties by doc id
    descending) with ranks 1..n, so the file's rank column agrees with what readers recompute.
    """
    p = Path(path)
    if not tag or re.search(r"\s", tag):
        raise InputError(f"run tag {tag!r} must be one non-empty word", path=p)
    _check_ids(frame, ("query_id", "doc_id", "score"), p)
    scores = pd.to_numeric(frame["score"], errors="coerce").to_numpy(dtype=np.float64)
    if not np.all(np.isfinite(scores)):
        raise InputError("scores must be finite numbers", path=p)
    qids = frame["query_id"].astype(str).reset_index(drop=True)
    qcodes, _ = pd.factorize(qids)
    docs = frame["doc_id"].astype(str).reset_index(drop=True)
    order = rank_order(qcodes, scores, docs, "float64")
    out = pd.DataFrame(
        {
            "query_id": _take(qids, order),
            "q0": "Q0",
            "doc_id": _take(docs, order),
            "rank": ranks_within(qcodes[order]),
            "score": scores[order],
            "tag": tag,
        }
    )
    with atomic_write(p) as fh:
        out.to_csv(fh, sep=" ", header=False, index=False, lineterminator="\n")
