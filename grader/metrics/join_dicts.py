"""`join_arrow` without Arrow, in Python dicts, for the small files read in plain Python: ids are
the file's UTF-8 bytes (compared as trec_eval's strcmp); the answer is the same `Ranked`."""

from __future__ import annotations

from collections.abc import Iterator
from functools import cached_property
from itertools import chain, pairwise, repeat
from typing import TYPE_CHECKING

import numpy as np

from grader.errors import InputError
from grader.metrics.judged_rows import Ideal, Int, Ranked, ideal_of, ranked_rows
from grader.metrics.rank_order import Precision, rank_order, ranks_within

if TYPE_CHECKING:
    from grader.metrics.join_arrow import Judgments

_UNJUDGED = np.iinfo(np.int64).min  # no grade: qrels grades are far smaller integers
_NO_GRADES: dict[bytes, int] = {}


class DictJudgments:
    """The judgments of a qrels: `grades[code][doc]` a query's doc's grade, `codes` each query id's
    code, `rows` the judgments as given (a plain class: a dataclass costs time at import)."""

    def __init__(
        self,
        query_ids: list[str],
        codes: dict[bytes, int],
        grades: list[dict[bytes, int]],
        ideal: Ideal,
        rows: tuple[list[bytes], list[bytes], Int],
    ) -> None:
        self.query_ids, self.codes, self.grades = query_ids, codes, grades
        self.ideal, self.rows = ideal, rows

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)

    def __len__(self) -> int:
        return len(self.rows[2])

    def top(self) -> int | None:
        """The highest grade, None without judgments."""
        return int(self.rows[2].max()) if len(self) else None

    @cached_property
    def arrow(self) -> Judgments:
        """The same judgments indexed by Arrow, for a run too large for plain Python."""
        import pyarrow as pa

        from grader.metrics.join_arrow import judgments

        queries, docs, grades = self.rows
        return judgments(
            pa.array([q.decode() for q in queries], pa.large_string()),
            pa.array([d.decode() for d in docs], pa.large_string()),
            grades,
        )

    def join(
        self,
        heads: list[bytes],
        qcodes: Int,
        docs: list[bytes],
        scores: np.ndarray,
        *,
        precision: Precision = "float32",
        depth: int | None = None,
    ) -> Ranked:
        """The judged rows of a run given as columns (each line's query as a code into `heads`, doc
        id, score), as `join_arrow.join_run` gives them. A (query, doc) twice is an InputError."""
        grouped = bool((qcodes[1:] >= qcodes[:-1]).all())
        _check_unique(qcodes, docs, grouped)
        order = rank_order(qcodes, scores, docs, precision)
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = ranks_within(qcodes[order])
        to_qrels = np.asarray([self.codes.get(q, -1) for q in heads], dtype=np.int64)
        known = to_qrels >= 0
        sizes = np.bincount(qcodes, minlength=len(heads))
        counted = sizes if depth is None else np.minimum(sizes, depth)
        returned = np.bincount(
            to_qrels[known], weights=counted[known], minlength=self.n_queries
        ).astype(np.int64)
        tables = [self.grades[c] if c >= 0 else _NO_GRADES for c in to_qrels.tolist()]
        found = np.fromiter(_grades_of(tables, qcodes, docs, grouped), np.int64, len(docs))
        keep = found != _UNJUDGED
        if depth is not None:
            keep &= rank <= depth
        rows = (to_qrels[qcodes[keep]], rank[keep], found[keep])
        unjudged = tuple(q.decode() for q, k in zip(heads, known.tolist(), strict=True) if not k)
        return ranked_rows(self.query_ids, self.ideal, rows, returned, unjudged)


def _groups(qcodes: Int) -> Iterator[tuple[int, int, int]]:
    """(code, first row, end row) of each run of equal codes."""
    edges = [0, *(np.flatnonzero(np.diff(qcodes)) + 1).tolist(), len(qcodes)]
    for a, b in pairwise(edges):
        if b > a:
            yield int(qcodes[a]), a, b


def _grades_of(
    tables: list[dict[bytes, int]], qcodes: Int, docs: list[bytes], grouped: bool
) -> Iterator[int]:
    """Each row's grade, _UNJUDGED where none: `tables[code]` looked up with its doc."""
    if grouped:
        return chain.from_iterable(
            map(tables[code].get, docs[a:b], repeat(_UNJUDGED)) for code, a, b in _groups(qcodes)
        )
    row_tables = map(tables.__getitem__, qcodes.tolist())
    return map(dict.get, row_tables, docs, repeat(_UNJUDGED))


def query_codes(ids: list[bytes]) -> tuple[list[bytes], Int]:
    """(distinct ids in order of first appearance, the code of each id: its position there)."""
    heads = list(dict.fromkeys(ids))
    code_of = {q: i for i, q in enumerate(heads)}
    return heads, np.fromiter(map(code_of.__getitem__, ids), dtype=np.int64, count=len(ids))


def _check_unique(qcodes: Int, docs: list[bytes], grouped: bool) -> None:
    """InputError when a (query, doc) comes twice."""
    if grouped:
        twice = any(len(set(docs[a:b])) != b - a for _, a, b in _groups(qcodes))
    else:
        twice = len(set(zip(qcodes.tolist(), docs, strict=True))) != len(docs)
    if twice:
        raise InputError("the run lists a (query, doc) twice")


def dict_judgments(
    heads: list[bytes], qcodes: Int, docs: list[bytes], grades: Int
) -> DictJudgments:
    """Index a qrels given as columns (query codes into `heads`, doc ids as bytes, grades); a
    (query, doc) graded twice is an InputError."""
    tables: list[dict[bytes, int]] = [{} for _ in heads]
    for code, doc, grade in zip(qcodes.tolist(), docs, grades.tolist(), strict=True):
        table = tables[code]
        if doc in table:
            raise InputError(
                f"the qrels grade doc {doc.decode()!r} twice for query {heads[code].decode()!r}",
                hint="keep one grade per (query, doc), e.g. drop_duplicates or aggregate first",
            )
        table[doc] = grade
    return DictJudgments(
        [q.decode() for q in heads],
        {q: i for i, q in enumerate(heads)},
        tables,
        ideal_of(qcodes, grades),
        ([heads[c] for c in qcodes.tolist()], docs, grades),
    )
