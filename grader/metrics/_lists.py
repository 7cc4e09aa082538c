"""Shared checks for the list functions (graded lists of one query's returned documents)."""

from __future__ import annotations

from collections.abc import Sequence

Grades = Sequence[int | None]


def check_k(k: int | None) -> None:
    """A cutoff is a positive integer or None (the whole list)."""
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ValueError(f"k must be a positive integer or None, got {k!r}")


def top(rels: Grades, k: int | None) -> Grades:
    """The first k grades (all of them when k is None)."""
    check_k(k)
    return rels if k is None else rels[:k]


def is_relevant(grade: int | None, threshold: int) -> bool:
    """Binary relevance: judged and grade >= threshold (unjudged, None, is not relevant)."""
    return grade is not None and grade >= threshold


def hits(rels: Grades, threshold: int) -> int:
    """How many of the grades reach the threshold."""
    return sum(1 for g in rels if is_relevant(g, threshold))
