"""Shared pieces of the list functions (graded lists of one query's returned documents)."""

from __future__ import annotations

from collections.abc import Sequence

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


def of_relevant(value: float, found: int, n_relevant: int) -> float:
    """value / n_relevant (0 when the query has none), checking that the `found` relevant fit."""
    if n_relevant < found:
        raise ValueError(f"n_relevant={n_relevant} is less than the {found} relevant found")
    return value / n_relevant if n_relevant else 0.0
