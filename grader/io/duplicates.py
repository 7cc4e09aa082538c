"""The duplicate check of the TREC readers: a (query, doc) listed twice, found by a vectorised
64-bit hash of every id, confirmed on the ids, and named with both its rows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from grader.errors import InputError

_HASH_BASE = np.uint64(1099511628211)
_HASH_ROWS = 1 << 20


def string_hashes(column: pa.ChunkedArray | pa.Array) -> npt.NDArray[np.uint64]:
    """A 64-bit polynomial hash of every string, vectorised over the Arrow buffers (equal strings
    hash equal; callers confirm matches): one pass over the bytes, far less than a hash table."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    parts = [_hash_chunk(chunk) for chunk in chunks]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.uint64)


def _hash_chunk(arr: pa.Array) -> npt.NDArray[np.uint64]:
    n = len(arr)
    out = np.zeros(n, dtype=np.uint64)
    if n == 0:
        return out
    wide = pa.types.is_large_string(arr.type)
    width = 8 if wide else 4
    buffers = arr.buffers()
    offsets = np.frombuffer(
        buffers[1], dtype=np.int64 if wide else np.int32, count=n + 1, offset=arr.offset * width
    ).astype(np.int64)
    data = (
        np.frombuffer(buffers[2], dtype=np.uint8)
        if buffers[2] is not None
        else np.zeros(0, dtype=np.uint8)
    )
    lengths = np.diff(offsets)
    longest = int(lengths.max())
    if longest == 0:
        return out
    if longest * n <= 2 * int(lengths.sum()):
        return _hash_by_position(data, offsets[:-1], lengths, longest)
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


def _hash_by_position(
    data: npt.NDArray[np.uint8],
    starts: npt.NDArray[np.int64],
    lengths: npt.NDArray[np.int64],
    longest: int,
) -> npt.NDArray[np.uint64]:
    """Hash of ids of similar length: byte j of every id at once, packed 8 to a word."""
    h = lengths.astype(np.uint64)
    word = np.zeros(len(starts), dtype=np.uint64)
    last = len(data) - 1
    for j in range(longest):
        byte = data[np.minimum(starts + j, last)]
        word |= np.where(lengths > j, byte, 0).astype(np.uint64) << np.uint64(8 * (j % 8))
        if j % 8 == 7 or j == longest - 1:
            h = h * _HASH_BASE ^ word
            word[:] = 0
    return h


def check_duplicates(
    table: pa.Table,
    qcodes: npt.NDArray[np.int64],
    error: Callable[[str, str, list[int]], InputError],
) -> None:
    """Raise `error(query_id, doc_id, [row, row])` at the earliest row that repeats a (query_id,
    doc_id) before it."""
    key = string_hashes(table["doc_id"]) ^ (
        qcodes.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    )
    ordered = np.sort(key)
    if not bool(np.any(ordered[1:] == ordered[:-1])):
        return
    del ordered
    order = np.argsort(key, kind="stable")  # equal keys in row order
    ordered = key[order]
    repeats = np.flatnonzero(ordered[1:] == ordered[:-1]) + 1
    # Each repeat's first row with its key; repeats confirmed on the ids (hashes may collide).
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    firsts = order[starts[np.searchsorted(starts, repeats, side="right") - 1]]
    seconds = order[repeats]
    at = int(np.argmin(seconds))
    a, b = int(firsts[at]), int(seconds[at])
    ids = [table[c].take(pa.array([a, b])).to_pylist() for c in ("query_id", "doc_id")]
    if ids[0][0] == ids[0][1] and ids[1][0] == ids[1][1]:
        raise error(str(ids[0][0]), str(ids[1][0]), [a, b])
    # a hash collision between different ids: check the rows of repeated hashes exactly
    _check_duplicates_exactly(table, np.unique(np.concatenate([firsts, seconds])), error)


def _check_duplicates_exactly(
    table: pa.Table,
    rows: npt.NDArray[np.int64],
    error: Callable[[str, str, list[int]], InputError],
) -> None:
    """The same check on the rows whose hashes repeat, on the ids themselves."""
    seen: dict[tuple[str, str], int] = {}
    taken = pa.array(np.sort(rows))
    qids = table["query_id"].take(taken).to_pylist()
    dids = table["doc_id"].take(taken).to_pylist()
    for row, pair in zip(np.sort(rows).tolist(), zip(qids, dids, strict=True), strict=True):
        if pair in seen:
            raise error(pair[0], pair[1], [seen[pair], row])
        seen[pair] = row


def duplicate_error(
    path: str | Path, qid: str, did: str, first: int, second: int, kind: str
) -> InputError:
    """The error for a (query, doc) listed on two lines of a run or qrels."""
    return InputError(
        f"query {qid!r} lists doc {did!r} twice, on lines {first} and {second}",
        path=path,
        line=second,
        hint=f"keep one line per (query, doc) in a {kind}",
    )
