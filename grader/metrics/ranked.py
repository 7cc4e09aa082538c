"""The qrels x run join every vectorised measure reads: judged run rows as flat numpy arrays.

Every measure relgrade computes only needs, per query, the ranks and grades of the *judged*
documents the run returned, how many documents it returned, and the query's judged grades
(for recall denominators and nDCG's ideal). So the 10M-row run is touched once, to look its
(query, doc) pairs up among the qrels; everything after works on the judged rows only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from grader.errors import InputError
from grader.metrics.ranking import Precision, rank_order, ranks_within

Int = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Ranked:
    """Judged run rows and judged grades of one run against one qrels, by qrels query index.

    Row arrays (`query`, `rank`, `grade`) hold one entry per returned document that has a
    grade, sorted by query then rank. `ideal_*` hold every judgment of the qrels sorted by
    query then grade descending (`ideal_pos` is the 1-based position in that ideal ranking).
    """

    query_ids: list[str]
    query: Int
    rank: Int
    grade: Int
    returned: Int
    ideal_query: Int
    ideal_grade: Int
    ideal_pos: Int
    unjudged_queries: tuple[str, ...] = ()

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)

    def per_query(
        self, rows: npt.NDArray[np.bool_], weights: npt.NDArray[np.float64] | None = None
    ) -> npt.NDArray[np.float64]:
        """Sum over the selected judged rows, per query (counts when `weights` is None)."""
        w = None if weights is None else weights[rows]
        out: npt.NDArray[np.float64] = np.bincount(
            self.query[rows], weights=w, minlength=self.n_queries
        ).astype(np.float64)
        return out

    def n_relevant(self, threshold: int) -> npt.NDArray[np.float64]:
        """Number of judged documents with grade >= threshold, per query."""
        sel = self.ideal_grade >= threshold
        out: npt.NDArray[np.float64] = np.bincount(
            self.ideal_query[sel], minlength=self.n_queries
        ).astype(np.float64)
        return out


def _strings(series: pd.Series) -> pa.Array:
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


def _grades(column: pd.Series) -> Int:
    """Integer grades; a missing or fractional grade is an error, never a 0."""
    values = np.asarray(pd.to_numeric(column, errors="coerce"), dtype=np.float64)
    bad = ~np.isfinite(values) | (values != np.round(values))
    if bad.any():
        raise InputError(
            f"the qrels hold a grade that is not an integer: {column.iloc[int(np.argmax(bad))]!r}",
            hint="drop failed judgments (no grade) before evaluating",
        )
    out: Int = values.astype(np.int64)
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


def join(
    qrels: pd.DataFrame,
    run: pd.DataFrame,
    *,
    precision: Precision = "float32",
    depth: int | None = None,
) -> Ranked:
    """Join a qrels frame [query_id, doc_id, grade] with a run [query_id, doc_id, rank|score].

    Queries are those of the qrels, in order of first appearance; run queries the qrels do not
    know are ignored (trec_eval does the same). Run rows keep their `rank` column if present
    (read_run computes it in trec_eval order); otherwise ranks come from `score`.
    With `depth`, only the top `depth` results of each query are looked up (enough for
    measures that all have a cutoff <= depth) and `returned` counts up to `depth`.
    """
    q_all = _strings(qrels["query_id"])
    q_unique = pc.unique(q_all)
    q_of_judgment = _index_in(q_all, q_unique)
    d_all = _strings(qrels["doc_id"])
    d_unique = pc.unique(d_all)
    n_docs = max(len(d_unique), 1)
    judged_key = q_of_judgment * n_docs + _index_in(d_all, d_unique)
    grades = _grades(qrels["grade"])
    by_key = np.argsort(judged_key, kind="stable")
    sorted_keys = judged_key[by_key]
    twice = np.flatnonzero(sorted_keys[1:] == sorted_keys[:-1])
    if twice.size:
        row = int(by_key[twice[0]])
        raise InputError(
            f"the qrels grade doc {qrels['doc_id'].iat[row]!r} twice for query "
            f"{qrels['query_id'].iat[row]!r}",
            hint="keep one grade per (query, doc), e.g. drop_duplicates or aggregate first",
        )

    ranks = _grouped_ranks(run, precision)
    run_queries, run_docs = _strings(run["query_id"]), _strings(run["doc_id"])
    if depth is not None and len(ranks) and int(ranks.max()) > depth:
        top = pa.array(np.flatnonzero(ranks <= depth))
        run_queries, run_docs = run_queries.take(top), run_docs.take(top)
        ranks = ranks[top.to_numpy()]
    run_q = _index_in(run_queries, q_unique)
    known = run_q >= 0
    unjudged: tuple[str, ...] = ()
    if not known.all():
        strays = pc.unique(run_queries.filter(pa.array(~known)))
        unjudged = tuple(str(q) for q in strays.to_pylist())
    returned = np.bincount(run_q[known], minlength=len(q_unique)).astype(np.int64)
    if known.all():
        rows = np.arange(len(run_q), dtype=np.int64)
    else:
        rows = np.flatnonzero(known)
        run_docs = run_docs.take(pa.array(rows))
    run_d = _index_in(run_docs, d_unique)
    judged = run_d >= 0
    rows, keys = rows[judged], run_q[rows[judged]] * n_docs + run_d[judged]
    at = np.searchsorted(sorted_keys, keys)
    at = np.minimum(at, max(len(sorted_keys) - 1, 0))
    hit = sorted_keys[at] == keys if len(sorted_keys) else np.zeros(len(keys), dtype=bool)
    rows, at = rows[hit], at[hit]
    row_query, row_rank = run_q[rows], ranks[rows]
    row_grade = grades[by_key[at]]
    order = np.lexsort((row_rank, row_query))

    ideal = np.lexsort((-grades, q_of_judgment))
    ideal_query = q_of_judgment[ideal]
    return Ranked(
        query_ids=[str(q) for q in q_unique.to_pylist()],
        query=row_query[order],
        rank=row_rank[order],
        grade=row_grade[order],
        returned=returned,
        ideal_query=ideal_query,
        ideal_grade=grades[ideal],
        ideal_pos=ranks_within(ideal_query),
        unjudged_queries=unjudged,
    )
