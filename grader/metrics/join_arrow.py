"""The qrels x run join with Arrow: the run is touched once, to look its (query, doc) pairs up
among the qrels' Arrow dictionary codes, giving the judged rows (`Ranked`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from grader.errors import InputError
from grader.metrics.judged_rows import Ideal, Int, Ranked, ideal_of, ranked_rows
from grader.metrics.rank_order import Precision, rank_order, ranks_within

if TYPE_CHECKING:  # pandas is imported where a frame is read: `relgrade evaluate` never needs it
    import pandas as pd


def arrow_strings(series: pd.Series) -> pa.Array:
    """A string column as one Arrow array (zero-copy when pandas already stores it in Arrow)."""
    arr = series.array
    out = arr.__arrow_array__() if hasattr(arr, "__arrow_array__") else None
    if out is None:
        out = pa.array(series.astype(str).to_numpy(dtype=object), pa.string())
    if isinstance(out, pa.ChunkedArray):
        out = out.chunk(0) if out.num_chunks == 1 else out.combine_chunks()
    if not pa.types.is_string(out.type) and not pa.types.is_large_string(out.type):
        out = pc.cast(out, pa.string())
    return out


def _index_in(values: pa.Array, value_set: pa.Array) -> Int:
    """Position of each value in `value_set`, -1 when absent."""
    found = pc.index_in(values, value_set=value_set).fill_null(-1)
    out: Int = np.asarray(found.to_numpy(zero_copy_only=False), dtype=np.int64)
    return out


def _grouped_ranks(run: pd.DataFrame, precision: Precision) -> Int:
    """The run's 1-based ranks: its `rank` column when rows come from read_run, else computed."""
    if "rank" in run.columns:
        ranks: Int = np.asarray(run["rank"].to_numpy(), dtype=np.int64)
        return ranks
    import pandas as pd

    qcodes, _ = pd.factorize(run["query_id"])
    scores = np.asarray(pd.to_numeric(run["score"], errors="coerce"), dtype=np.float64)
    if not np.all(np.isfinite(scores)):
        raise InputError(
            "the run holds a score that is not a finite number",
            hint="give every row a numeric score, or a rank column",
        )
    docs = run["doc_id"].astype(str).reset_index(drop=True)
    order = rank_order(qcodes, scores, docs, precision)
    ranks = np.empty(len(order), dtype=np.int64)
    ranks[order] = ranks_within(qcodes[order])
    return ranks


@dataclass(frozen=True)
class Judgments:
    """The judgments of a qrels as the join looks them up: distinct `query_ids` (first appearance)
    and `doc_ids`; a judgment's key is `query code * len(doc_ids) + doc code`, `sorted_keys` in
    order with `sorted_grades` beside them; `ideal` as in `Ranked`."""

    query_ids: pa.Array
    doc_ids: pa.Array
    sorted_keys: Int
    sorted_grades: Int
    ideal: Ideal

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)

    def query_codes(self, queries: pa.Array) -> Int:
        """The qrels code of each query id, -1 for a query the qrels do not know."""
        return _index_in(queries, self.query_ids)

    def grades_of(self, query_codes: Int, docs: pa.Array) -> tuple[Int, Int]:
        """(positions, grades) of the judged (query, doc) pairs among rows of known queries; doc
        ids are looked up among these queries' judged docs only (a block of a large run has few)."""
        n_docs = max(len(self.doc_ids), 1)
        queries = np.unique(query_codes)
        if len(queries) == self.n_queries:
            doc_codes = _index_in(docs, self.doc_ids)
        else:
            lo = np.searchsorted(self.sorted_keys, queries * n_docs)
            hi = np.searchsorted(self.sorted_keys, (queries + 1) * n_docs)
            sizes = hi - lo
            own = np.arange(int(sizes.sum())) + np.repeat(lo - (np.cumsum(sizes) - sizes), sizes)
            local = np.unique(self.sorted_keys[own] % n_docs)
            found = _index_in(docs, self.doc_ids.take(pa.array(local)))
            doc_codes = np.where(found >= 0, local[np.maximum(found, 0)], -1)
        rows = np.flatnonzero(doc_codes >= 0)
        keys = query_codes[rows] * max(len(self.doc_ids), 1) + doc_codes[rows]
        if not len(self.sorted_keys):
            return rows[:0], rows[:0]
        at = np.minimum(np.searchsorted(self.sorted_keys, keys), len(self.sorted_keys) - 1)
        hit = self.sorted_keys[at] == keys
        return rows[hit], self.sorted_grades[at[hit]]

    def ranked(
        self,
        query: Int,
        rank: Int,
        grade: Int,
        returned: Int,
        unjudged_queries: tuple[str, ...] = (),
    ) -> Ranked:
        """The `Ranked` of judged run rows given in any order (sorted here by query, rank)."""
        query_ids = [str(q) for q in self.query_ids.to_pylist()]
        return ranked_rows(query_ids, self.ideal, (query, rank, grade), returned, unjudged_queries)


def judgments(query_ids: pa.Array, doc_ids: pa.Array, grades: Int) -> Judgments:
    """Index a qrels given as columns (one row per judgment). A (query, doc) graded twice is an
    InputError naming both ids."""
    q_unique = pc.unique(query_ids)
    q_of_judgment = _index_in(query_ids, q_unique)
    d_unique = pc.unique(doc_ids)
    judged_key = q_of_judgment * max(len(d_unique), 1) + _index_in(doc_ids, d_unique)
    by_key = np.argsort(judged_key, kind="stable")
    sorted_keys = judged_key[by_key]
    twice = np.flatnonzero(sorted_keys[1:] == sorted_keys[:-1])
    if twice.size:
        row = int(by_key[twice[0]])
        raise InputError(
            f"the qrels grade doc {doc_ids[row].as_py()!r} twice for query "
            f"{query_ids[row].as_py()!r}",
            hint="keep one grade per (query, doc), e.g. drop_duplicates or aggregate first",
        )
    ideal = ideal_of(q_of_judgment, grades)
    return Judgments(q_unique, d_unique, sorted_keys, grades[by_key], ideal)


def judgments_of(qrels: pd.DataFrame) -> Judgments:
    """`judgments` of a qrels frame [query_id, doc_id, grade]; a missing or fractional grade is an
    error, never a 0."""
    import pandas as pd

    column = qrels["grade"]
    grades = np.asarray(pd.to_numeric(column, errors="coerce"), dtype=np.float64)
    bad = ~np.isfinite(grades) | (grades != np.round(grades))
    if bad.any():
        raise InputError(
            f"the qrels hold a grade that is not an integer: {column.iloc[int(np.argmax(bad))]!r}",
            hint="drop failed judgments (no grade) before evaluating",
        )
    queries, docs = arrow_strings(qrels["query_id"]), arrow_strings(qrels["doc_id"])
    return judgments(queries, docs, grades.astype(np.int64))


def join(
    qrels: pd.DataFrame,
    run: pd.DataFrame,
    *,
    precision: Precision = "float32",
    depth: int | None = None,
) -> Ranked:
    """Join a qrels frame with a run [query_id, doc_id, rank|score]: the qrels' queries in order of
    first appearance (others ignored, as by trec_eval); with `depth`, each ranking's top `depth`."""
    return join_run(judgments_of(qrels), run, precision=precision, depth=depth)


def join_run(
    judged: Judgments,
    run: pd.DataFrame,
    *,
    precision: Precision = "float32",
    depth: int | None = None,
) -> Ranked:
    """`join` with the qrels already indexed (see `judgments`)."""
    ranks = _grouped_ranks(run, precision)
    run_queries, run_docs = arrow_strings(run["query_id"]), arrow_strings(run["doc_id"])
    if depth is not None and len(ranks) and int(ranks.max()) > depth:
        top = pa.array(np.flatnonzero(ranks <= depth))
        run_queries, run_docs = run_queries.take(top), run_docs.take(top)
        ranks = ranks[top.to_numpy()]
    run_q = judged.query_codes(run_queries)
    known = run_q >= 0
    unjudged: tuple[str, ...] = ()
    if not known.all():
        strays = pc.unique(run_queries.filter(pa.array(~known)))
        unjudged = tuple(str(q) for q in strays.to_pylist())
    returned = np.bincount(run_q[known], minlength=judged.n_queries).astype(np.int64)
    if known.all():
        rows = np.arange(len(run_q), dtype=np.int64)
    else:
        rows = np.flatnonzero(known)
        run_docs = run_docs.take(pa.array(rows))
    at, grade = judged.grades_of(run_q[rows], run_docs)
    rows = rows[at]
    return judged.ranked(run_q[rows], ranks[rows], grade, returned, unjudged)
