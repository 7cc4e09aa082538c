"""trec_eval's ranking order, vectorised: per query, score descending, ties by doc id descending;
scores compare in float32 (trec_eval 9, pytrec_eval) or, `precision="float64"`, in double. And
the one order query ids are listed in (`query_order`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, TypeAlias

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

DocIds: TypeAlias = "pd.Series | pa.ChunkedArray | pa.Array | list[str] | list[bytes]"

Precision = Literal["float32", "float64"]


def _sort_by_query_score(q: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Stable order by query code ascending, then score descending."""
    if key.dtype == np.float32:
        # One uint64 sort instead of a two-key lexsort: query code in the high 32 bits and the
        # float32 mapped to an order-preserving uint32 (inverted, for descending) in the low.
        bits = (key + np.float32(0.0)).view(np.uint32).astype(np.uint64)  # -0.0 becomes +0.0
        sign = bits >> np.uint64(31)
        mono = np.where(sign == 1, ~bits & np.uint64(0xFFFFFFFF), bits | np.uint64(0x80000000))
        packed = (q.astype(np.uint64) << np.uint64(32)) | (np.uint64(0xFFFFFFFF) - mono)
        return np.argsort(packed, kind="stable")
    return np.lexsort((-key, q))


def _doc_descending(doc_ids: DocIds, rows: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Order of `rows` by tie group ascending, then doc id descending (bytewise in UTF-8)."""
    if isinstance(doc_ids, list):  # Python compares str by code point: UTF-8's byte order
        docs = [doc_ids[r] for r in rows.tolist()]
        by_doc = sorted(range(len(docs)), key=docs.__getitem__, reverse=True)
        by_doc.sort(key=group.tolist().__getitem__)  # stable: doc order kept within a group
        return np.asarray(by_doc, dtype=np.int64)
    import pyarrow as pa
    import pyarrow.compute as pc

    if not isinstance(doc_ids, pa.Array | pa.ChunkedArray):  # a pandas Series
        docs = pa.array(doc_ids.take(rows).astype(str).to_numpy(dtype=object), pa.large_string())
    else:
        docs = doc_ids.take(pa.array(rows))
    tied_docs = pa.table({"group": pa.array(group), "doc": docs})
    within: np.ndarray = pc.sort_indices(
        tied_docs, sort_keys=[("group", "ascending"), ("doc", "descending")]
    ).to_numpy()
    return within


def rank_order(
    query_codes: np.ndarray,
    scores: np.ndarray,
    doc_ids: DocIds,
    precision: Precision,
) -> np.ndarray:
    """Row order of trec_eval: by query, score descending (in `precision`), doc id descending
    (bytewise in UTF-8, as strcmp)."""
    key = scores.astype(np.float32 if precision == "float32" else np.float64)
    n = len(key)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    q = query_codes
    same_query = q[1:] == q[:-1]
    in_order = bool(np.all((q[1:] > q[:-1]) | (same_query & np.less_equal(key[1:], key[:-1]))))
    order = np.arange(n) if in_order else _sort_by_query_score(q, key)
    qs, ks = q[order], key[order]
    tied = (qs[1:] == qs[:-1]) & (ks[1:] == ks[:-1])
    if not tied.any():
        return order
    # Only rows that share (query, score) with a neighbour need the doc id tie-break.
    in_tie = np.zeros(n, dtype=bool)
    in_tie[1:] |= tied
    in_tie[:-1] |= tied
    pos = np.flatnonzero(in_tie)
    group = np.cumsum(np.concatenate(([True], ~tied)))[pos]
    within = _doc_descending(doc_ids, order[pos], group)
    order = order.copy()
    order[pos] = order[pos][within]
    return order


def ranks_within(query_codes: np.ndarray) -> np.ndarray:
    """1-based position of each row within its run of equal query codes (rows grouped)."""
    n = len(query_codes)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate(([True], query_codes[1:] != query_codes[:-1])))
    sizes = np.diff(np.append(starts, n))
    return np.arange(n, dtype=np.int64) - np.repeat(starts, sizes) + 1


def sum_before_within(values: np.ndarray, query_codes: np.ndarray) -> np.ndarray:
    """For each row, the sum of `values` over the earlier rows of its query (rows grouped)."""
    before: np.ndarray = np.cumsum(values) - values
    first = np.arange(len(before)) - ranks_within(query_codes) + 1  # the query's first row
    out: np.ndarray = before - before[first]
    return out


def query_order(query_ids: Sequence[str]) -> npt.NDArray[np.intp]:
    """Positions that list `query_ids` in one stable order: by number when every id is a whole
    number (2, 10, 100), else as text; ids equal as numbers (1, 01) fall back to text."""
    ids = [str(q) for q in query_ids]
    if ids and all(q.isascii() and q.isdigit() for q in ids):
        keyed: list[tuple[int, str]] = [(int(q), q) for q in ids]
        order = sorted(range(len(ids)), key=keyed.__getitem__)
    else:
        order = sorted(range(len(ids)), key=ids.__getitem__)
    return np.asarray(order, dtype=np.intp)
