"""A TREC run read block by block against indexed qrels: only its judged rows are kept.

Every measure needs, per query, the ranks and grades of the judged documents a run returned and
how many it returned (see `grader.metrics.ranked`). So a 10-million-line run need not be held
whole: it is read in blocks of a few MiB (Arrow's streaming CSV reader), each complete ranking
is ordered as trec_eval orders it (score descending in the chosen precision, ties by doc id
descending), and of its rows only (qrels query code, rank, grade) of judged documents are kept,
as int64 arrays. Peak memory is a block, not the file; no per-row Python object is made.

The checks are those of `read_run`. Whenever a block is not what the fast path takes as is (a
line with the wrong number of columns, irregular whitespace, a score that is not a finite
number, bad UTF-8, a (query, doc) listed twice) or a query's lines are not together in the
file, the run is read whole by `read_run`, which reads irregular files and names the exact line
of an error: the answer never depends on which path ran.
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from grader.errors import InputError
from grader.io.runs import run_source
from grader.io.streams import arrow_input
from grader.io.trec import RUN_COLUMNS, read_run, scan_run
from grader.io.trec_parse import _sniff_delimiter, convert_options, parse_options, regular_rows
from grader.metrics.judged_rows import JudgedRun
from grader.metrics.ranked import Judgments, join_run
from grader.metrics.ranking import Precision, rank_order, ranks_within

BLOCK = 1 << 22  # 4 MiB of text, ~120,000 run lines: Arrow's parse stays fast, memory small

Int = npt.NDArray[np.int64]


class _ReadWhole(Exception):
    """The block reader cannot take this file as is: `read_run` reads it (or names the error).
    `bad_block`: a block was rejected (a bad or irregular line), not the order of the file."""

    def __init__(self, *, bad_block: bool = True) -> None:
        super().__init__()
        self.bad_block = bad_block


def judged_run_file(
    path: str,
    judged: Judgments,
    *,
    precision: Precision = "float32",
    depth: int | None = None,
    stdin: BinaryIO | None = None,
) -> JudgedRun:
    """`judged_run` of a run file, or with `-` of the run on `stdin` (default: the process's);
    errors then name "stdin"."""
    with run_source(path, stdin) as source:
        return judged_run(source, judged, precision=precision, depth=depth)


def judged_run(
    path: str | Path,
    judged: Judgments,
    *,
    precision: Precision = "float32",
    depth: int | None = None,
) -> JudgedRun:
    """The run at `path` joined with `judged`, as `join(qrels, read_run(path), depth=depth)`
    gives it, read in blocks. Raises what `read_run` raises (file, line, fix)."""
    if precision not in ("float32", "float64"):
        raise InputError(f"unknown precision {precision!r}", hint="use float32 or float64")
    try:
        return _Blocks(Path(path), judged, precision, depth).read()
    except _ReadWhole as exc:
        scan = exc.bad_block
    except pa.ArrowException:
        scan = True
    if scan:  # (outside the handler, so the block reader's state is freed first)
        scan_run(path)  # a bad line is named in bounded memory, before a whole read
    frame = read_run(path, precision=precision)
    return JudgedRun(join_run(judged, frame, precision=precision, depth=depth), len(frame))


class _Blocks:
    """One pass over a run file, keeping the judged rows of each complete ranking."""

    def __init__(self, path: Path, judged: Judgments, precision: Precision, depth: int | None):
        self.path, self.judged, self.precision, self.depth = path, judged, precision, depth
        self.returned = np.zeros(judged.n_queries, dtype=np.int64)
        self.rows = 0
        self.heads: list[pa.Array] = []  # each ranking's query id, in file order
        self.kept: list[tuple[Int, Int, Int]] = []  # (qrels query code, rank, grade)

    def read(self) -> JudgedRun:
        sniffed = _sniff_delimiter(self.path)
        if sniffed is None:
            raise _ReadWhole(bad_block=False)  # empty, a BOM, mixed separators: read_run's
        delimiter, width = sniffed
        names = list(RUN_COLUMNS) + [f"extra_{i}" for i in range(width - len(RUN_COLUMNS))]
        types = {n: pa.string() for n in RUN_COLUMNS}
        types["score"] = pa.float64()
        carry: tuple[pa.Array, pa.Array, npt.NDArray[np.float64]] | None = None
        with (
            arrow_input(self.path) as source,
            pacsv.open_csv(
                source,
                read_options=pacsv.ReadOptions(column_names=names, block_size=BLOCK),
                parse_options=parse_options(delimiter),
                convert_options=convert_options(RUN_COLUMNS, types),
            ) as reader,
        ):
            for batch in reader:
                queries, docs, scores = self._checked(batch)
                if carry is not None:
                    queries = pa.concat_arrays([carry[0], queries])
                    docs = pa.concat_arrays([carry[1], docs])
                    scores = np.concatenate([carry[2], scores])
                if not len(queries):
                    continue
                # the last ranking may go on in the next block: keep it for then
                last = _starts(queries)[-1]
                if last:
                    self._rankings(queries.slice(0, last), docs.slice(0, last), scores[:last])
                carry = (queries.slice(last), docs.slice(last), scores[last:])
        if carry is not None and len(carry[0]):
            self._rankings(*carry)
        return self._result()

    def _checked(self, batch: pa.RecordBatch) -> tuple[pa.Array, pa.Array, npt.NDArray[np.float64]]:
        """A block's (query ids, doc ids, scores) without comment lines; _ReadWhole when a
        field is empty (irregular whitespace) or a score is missing or not finite."""
        rows = regular_rows(batch, RUN_COLUMNS, "score")
        if rows is None:
            raise _ReadWhole
        self.rows += rows.num_rows
        scores = np.asarray(rows.column("score").to_numpy(), dtype=np.float64)
        if not np.isfinite(scores).all():
            raise _ReadWhole
        return rows.column("query_id"), rows.column("doc_id"), scores

    def _rankings(self, queries: pa.Array, docs: pa.Array, scores: npt.NDArray[np.float64]) -> None:
        """Rank whole rankings (a query's lines, together) and keep their judged rows."""
        n = len(queries)
        starts = _starts(queries)
        sizes = np.diff(np.append(starts, n))
        group = np.repeat(np.arange(len(starts), dtype=np.int64), sizes)
        heads = queries.take(pa.array(starts))
        self.heads.append(heads)
        encoded = pc.dictionary_encode(docs)
        doc_codes = np.asarray(encoded.indices.to_numpy(), dtype=np.int64)
        pairs = np.sort(group * max(len(encoded.dictionary), 1) + doc_codes)
        if bool(np.any(pairs[1:] == pairs[:-1])):
            raise _ReadWhole(bad_block=False)  # a (query, doc) twice: read_run names both lines
        order = rank_order(group, scores, docs, self.precision)
        rank = np.empty(n, dtype=np.int64)
        rank[order] = ranks_within(group[order])
        query = self.judged.query_codes(heads)
        counted = sizes if self.depth is None else np.minimum(sizes, self.depth)
        known = query >= 0
        self.returned += np.bincount(
            query[known], weights=counted[known], minlength=self.judged.n_queries
        ).astype(np.int64)
        rows = known[group]
        if self.depth is not None:
            rows &= rank <= self.depth
        if not rows.any():
            return
        picked = np.flatnonzero(rows)
        row_query = query[group[picked]]
        row_docs = docs if len(picked) == n else docs.take(pa.array(picked))
        at, grade = self.judged.grades_of(row_query, row_docs)
        self.kept.append((row_query[at], rank[picked[at]], grade))

    def _result(self) -> JudgedRun:
        heads = pa.concat_arrays(self.heads) if self.heads else pa.array([], pa.string())
        if len(pc.unique(heads)) != len(heads):
            raise _ReadWhole(bad_block=False)  # a query's lines are not together: rank it whole
        stray = heads.filter(pc.less(pa.array(self.judged.query_codes(heads)), 0))
        unjudged = tuple(str(q) for q in stray.to_pylist())
        empty = np.zeros(0, dtype=np.int64)
        query, rank, grade = (
            (np.concatenate(parts) for parts in zip(*self.kept, strict=True))
            if self.kept
            else (empty, empty, empty)
        )
        ranked = self.judged.ranked(query, rank, grade, self.returned, unjudged)
        return JudgedRun(ranked, self.rows)


def _starts(queries: pa.Array) -> Int:
    """Row index where each run of equal query ids begins."""
    n = len(queries)
    if n < 2:
        return np.zeros(min(n, 1), dtype=np.int64)
    change = pc.not_equal(queries.slice(1), queries.slice(0, n - 1))
    flags = np.asarray(change.to_numpy(zero_copy_only=False), dtype=bool)
    return np.concatenate(([0], np.flatnonzero(flags) + 1)).astype(np.int64)
