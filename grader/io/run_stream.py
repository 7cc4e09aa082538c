"""A TREC run read block by block against indexed qrels, keeping only its judged rows: peak
memory is a block, not the file. A bad line is named as `read_run` names it; a query's lines
apart or a (query, doc) twice have the run read whole by `read_run`, with the same answer."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from grader.io.streams import TREC_LINE_LIMIT
from grader.io.trec import group_starts, read_run, score_check
from grader.io.trec_arrow import RUN, check_lines, table_blocks
from grader.metrics.join_arrow import Judgments, join_run
from grader.metrics.judged_rows import JudgedRun
from grader.metrics.rank_order import Precision, rank_order, ranks_within

BLOCK = 1 << 22  # 4 MiB of text, ~120,000 run lines: Arrow's parse stays fast, memory small
_PARSE_CHUNK = 2 * TREC_LINE_LIMIT  # Arrow parses a block in chunks of this, on its threads

Int = npt.NDArray[np.int64]


class _ReadWhole(Exception):
    """The block reader cannot take this file as is: `read_run` reads it (or names the error)."""


def judged_run(
    path: str | Path,
    judged: Judgments,
    *,
    precision: Precision = "float32",
    depth: int | None = None,
) -> JudgedRun:
    """The run at `path` joined with `judged`, as `join(qrels, read_run(path), depth=depth)` gives
    it, read in blocks. Raises what `read_run` raises."""
    try:
        return _Blocks(Path(path), judged, precision, depth).read()
    except (_ReadWhole, pa.ArrowException):
        pass
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
        check = score_check(self.path)
        carry: tuple[pa.Array, pa.Array, npt.NDArray[np.float64]] | None = None
        blocks = table_blocks(
            self.path, RUN, check, size=BLOCK, ids=pa.string(), chunk=_PARSE_CHUNK
        )
        for before, block, table in blocks:
            scores = np.asarray(table["score"].to_numpy(), dtype=np.float64)
            if not np.isfinite(scores).all():
                check_lines(self.path, block, before, RUN, check)  # names the line
                raise _ReadWhole
            self.rows += table.num_rows
            queries, docs = table["query_id"].combine_chunks(), table["doc_id"].combine_chunks()
            if carry is not None:
                queries = pa.concat_arrays([carry[0], queries])
                docs = pa.concat_arrays([carry[1], docs])
                scores = np.concatenate([carry[2], scores])
            if not len(queries):
                continue
            # the last ranking may go on in the next block: keep it for then
            last = group_starts(queries)[-1]
            if last:
                self._rankings(queries.slice(0, last), docs.slice(0, last), scores[:last])
            carry = (queries.slice(last), docs.slice(last), scores[last:])
        if carry is not None and len(carry[0]):
            self._rankings(*carry)
        return self._result()

    def _rankings(self, queries: pa.Array, docs: pa.Array, scores: npt.NDArray[np.float64]) -> None:
        """Rank whole rankings (a query's lines, together) and keep their judged rows."""
        n = len(queries)
        starts = group_starts(queries)
        sizes = np.diff(np.append(starts, n))
        group = np.repeat(np.arange(len(starts), dtype=np.int64), sizes)
        heads = queries.take(pa.array(starts))
        self.heads.append(heads)
        encoded = pc.dictionary_encode(docs)
        doc_codes = np.asarray(encoded.indices.to_numpy(), dtype=np.int64)
        pairs = np.sort(group * max(len(encoded.dictionary), 1) + doc_codes)
        if bool(np.any(pairs[1:] == pairs[:-1])):
            raise _ReadWhole  # a (query, doc) twice: `read_run` names both lines
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
            raise _ReadWhole  # a query's lines are not together: rank it whole
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
