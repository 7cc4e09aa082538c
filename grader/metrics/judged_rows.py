"""The judged rows every measure reads (`Ranked`), as plain numpy arrays: both qrels indexes
(`join_arrow`, `join_dicts`) end here, so the kernels never know which one ran. And the pieces
the list functions share (`Grades`: one query's returned documents' grades, None unjudged)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from grader.metrics.rank_order import ranks_within

Int = npt.NDArray[np.int64]
Float = npt.NDArray[np.float64]
Grades = Sequence[int | None]


def top(rels: Grades, k: int | None) -> Grades:
    """The first k grades (all of them when k is None); k is a positive integer or None."""
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ValueError(f"k must be a positive integer or None, got {k!r}")
    return rels if k is None else rels[:k]


def relevant_ranks(rels: Grades, threshold: int, k: int | None = None) -> list[int]:
    """The 1-based ranks within the top k of the grades >= threshold (unjudged, None, is not)."""
    return [i for i, g in enumerate(top(rels, k), 1) if g is not None and g >= threshold]


def hits(rels: Grades, threshold: int, k: int | None = None) -> int:
    """How many of the top k grades reach the threshold."""
    return len(relevant_ranks(rels, threshold, k))


@dataclass(frozen=True)
class Ranked:
    """Judged run rows and judged grades of one run against one qrels, by qrels query index:
    `query`, `rank`, `grade` per returned judged document, by query then rank; `ideal_*` every
    judgment by query then grade descending (`ideal_pos`: 1-based position in the ideal ranking)."""

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

    def per_query(self, rows: npt.NDArray[np.bool_], weights: Float | None = None) -> Float:
        """Sum over the selected judged rows, per query (counts when `weights` is None)."""
        w = None if weights is None else weights[rows]
        return np.bincount(self.query[rows], weights=w, minlength=self.n_queries).astype(np.float64)

    def top(self, k: int | None) -> npt.NDArray[np.bool_]:
        """The rows ranked within the top k (every row when k is None)."""
        return self.rank <= k if k is not None else np.ones(len(self.rank), dtype=bool)

    def relevant(self, threshold: int, k: int | None = None) -> npt.NDArray[np.bool_]:
        """The rows graded >= threshold, within the top k when k is given."""
        sel = self.grade >= threshold
        return sel if k is None else sel & (self.rank <= k)

    def condensed(self) -> Ranked:
        """judged_only=True's rows: without unjudged (or negatively graded) results, ranked 1..
        again, `returned` counting them (trec_eval -J); the qrels side does not change."""
        keep = self.grade >= 0
        query = self.query[keep]
        returned = np.bincount(query, minlength=self.n_queries).astype(np.int64)
        rank, grade = ranks_within(query), self.grade[keep]
        return dataclasses.replace(self, query=query, rank=rank, grade=grade, returned=returned)

    def n_relevant(self, threshold: int) -> Float:
        """Number of judged documents with grade >= threshold, per query."""
        sel = self.ideal_grade >= threshold
        return np.bincount(self.ideal_query[sel], minlength=self.n_queries).astype(np.float64)


def divide(num: Float, den: Float) -> Float:
    """num / den per query, 0 where den is 0 (a query without relevant documents scores 0)."""
    return np.divide(num, den, out=np.zeros_like(num), where=den > 0)


class Ideal(NamedTuple):  # a NamedTuple: cheaper to define at import than a dataclass
    """Every judgment of a qrels sorted by query, then grade descending (see `Ranked`)."""

    query: Int
    grade: Int
    pos: Int


def ideal_of(query_codes: Int, grades: Int) -> Ideal:
    """The ideal rankings of judgments given as (query code, grade) in file order."""
    order = np.lexsort((-grades, query_codes))
    query = query_codes[order]
    return Ideal(query=query, grade=grades[order], pos=ranks_within(query))


def ranked_rows(
    query_ids: list[str],
    ideal: Ideal,
    rows: tuple[Int, Int, Int],
    returned: Int,
    unjudged_queries: tuple[str, ...] = (),
) -> Ranked:
    """The `Ranked` of judged run rows (query code, rank, grade) given in any order."""
    query, rank, grade = rows
    order = np.lexsort((rank, query))
    return Ranked(
        query_ids=query_ids,
        query=np.asarray(query[order], dtype=np.int64),
        rank=np.asarray(rank[order], dtype=np.int64),
        grade=np.asarray(grade[order], dtype=np.int64),
        returned=returned,
        ideal_query=ideal.query,
        ideal_grade=ideal.grade,
        ideal_pos=ideal.pos,
        unjudged_queries=unjudged_queries,
    )


class JudgedRun(NamedTuple):
    """A run joined with the qrels (`ranked`) and the number of run lines it has (`rows`)."""

    ranked: Ranked
    rows: int
