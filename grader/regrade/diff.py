"""What changed between two versions of the same judgments: the old->new transition matrix,
Cohen's kappa between the versions, the pairs whose grade moved (with both reasons), failures and
the cost of the regrade with and without the Batch API discount.

Pure functions over `Judgment`s; no I/O. Kappa is the metrics core's (`grader.metrics.kappa`),
the same one calibration uses.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from grader.metrics.kappa import kappa
from grader.models import GRADES, Judgment


@dataclass(frozen=True)
class VersionPair:
    """One selected (query, doc) pair: its old judgment and its new one (None if not graded yet)."""

    query_id: str
    doc_id: str
    old: Judgment | None
    new: Judgment | None


@dataclass(frozen=True)
class ChangedPair:
    """A pair graded ok in both versions whose grade moved."""

    query_id: str
    doc_id: str
    old_grade: int
    new_grade: int
    old_reason: str | None
    new_reason: str | None


@dataclass
class RegradeDiff:
    """The diff between versions. `transition[i][j]` counts pairs old grade i -> new grade j,
    over the pairs graded ok in both versions (`compared`)."""

    n: int
    compared: int
    changed: int
    kappa_between_versions: float | None
    transition: list[list[int]]
    failed: int
    pending: int
    cost: float | None  # None when some new judgment used tokens but has no price
    cost_without_batch: float | None
    batch_graded: int
    changed_pairs: list[ChangedPair] = field(default_factory=list)
    no_old_grade: int = 0
    """Pairs graded ok now whose old judgment had no grade (failed): in no other count."""
    metric_deltas: list[dict[str, Any]] = field(default_factory=list)
    failed_pairs: list[dict[str, str]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The JSON shape of `regrade --format json` (keys fixed by DESIGN.md, more added)."""
        return asdict(self)


def cohen_kappa(old: Sequence[int], new: Sequence[int]) -> float | None:
    """Unweighted Cohen's kappa over grades 0..3: (p_o - p_e) / (1 - p_e).

    None when undefined: no pairs, or both versions put every pair in one and the same grade
    (p_e = 1, so agreement beyond chance cannot be measured).
    """
    if len(old) != len(new):
        raise ValueError("old and new must have the same length")
    value = float(kappa(transition_matrix(old, new), "none"))
    return None if math.isnan(value) else value


def transition_matrix(old: Iterable[int], new: Iterable[int]) -> list[list[int]]:
    """4x4 counts: rows old grade 0..3, columns new grade 0..3."""
    matrix = [[0] * len(GRADES) for _ in GRADES]
    for a, b in zip(old, new, strict=True):
        matrix[a][b] += 1
    return matrix


def diff_versions(
    pairs: Sequence[VersionPair],
    *,
    batch_keys: frozenset[str] | set[str] = frozenset(),
    batch_discount: float = 0.5,
) -> RegradeDiff:
    """Compare old and new judgments of the selected pairs.

    `batch_keys` are the new keys graded through the Batch API; their stored cost already carries
    `batch_discount`, so the cost without it is cost / discount. A failed new judgment is counted
    in `failed`, never compared as a grade; a pair with no new judgment yet is `pending`.

    Every count is of id pairs (`pairs`); id pairs with equal texts share one new judgment (one
    content key, one request), whose cost is counted once.
    """
    old_grades: list[int] = []
    new_grades: list[int] = []
    changed: list[ChangedPair] = []
    failed: list[dict[str, str]] = []
    pending = 0
    batch_graded = 0
    no_old_grade = 0
    for pair in pairs:
        new = pair.new
        if new is None:
            pending += 1
            continue
        if new.key in batch_keys:
            batch_graded += 1
        if new.status != "ok" or new.grade is None:
            error = new.error
            failed.append(
                {
                    "query_id": pair.query_id,
                    "doc_id": pair.doc_id,
                    "error": f"{error.type}: {error.message}" if error else "failed",
                }
            )
            continue
        old = pair.old
        if old is None or old.status != "ok" or old.grade is None:
            no_old_grade += 1
            continue
        old_grades.append(old.grade)
        new_grades.append(new.grade)
        if old.grade != new.grade:
            changed.append(
                ChangedPair(
                    query_id=pair.query_id,
                    doc_id=pair.doc_id,
                    old_grade=old.grade,
                    new_grade=new.grade,
                    old_reason=old.reason,
                    new_reason=new.reason,
                )
            )
    cost, cost_without = _costs(pairs, batch_keys, batch_discount)
    return RegradeDiff(
        n=len(pairs),
        compared=len(old_grades),
        changed=len(changed),
        kappa_between_versions=cohen_kappa(old_grades, new_grades),
        transition=transition_matrix(old_grades, new_grades),
        failed=len(failed),
        pending=pending,
        cost=cost,
        cost_without_batch=cost_without,
        batch_graded=batch_graded,
        changed_pairs=changed,
        failed_pairs=failed,
        no_old_grade=no_old_grade,
    )


def _costs(
    pairs: Sequence[VersionPair], batch_keys: frozenset[str] | set[str], batch_discount: float
) -> tuple[float | None, float | None]:
    """The cost of the new judgments (each content key once), and what it would have been
    without the Batch API discount; both None when some new judgment used tokens but has no
    price."""
    cost = 0.0
    cost_without = 0.0
    unpriced = 0
    paid: set[str] = set()
    for pair in pairs:
        new = pair.new
        if new is None or new.key in paid:
            continue
        paid.add(new.key)
        if new.cost is None and (new.usage.prompt_tokens or new.usage.completion_tokens):
            unpriced += 1
        if new.cost is not None:
            cost += new.cost
            in_batch = new.key in batch_keys
            cost_without += new.cost / batch_discount if in_batch else new.cost
    if unpriced:
        return None, None
    return round(cost, 10), round(cost_without, 10)
