"""What changed between two versions of the same judgments: the transition matrix, kappa between
them, the pairs whose grade moved, failures, the cost with and without the Batch API discount, and
each run's scores under both (over pairs graded ok in both: else a one-sided hole fakes a delta)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import pandas as pd

from grader.errors import RelgradeWarning
from grader.io.judgments import qrels_frame
from grader.metrics import evaluate, mean_scores, parse_measure
from grader.metrics.kappa import cohen_kappa as kappa_of
from grader.metrics.kappa import confusion_matrix
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
    """The diff between versions; `transition[i][j]`: pairs graded ok in both, old i, new j."""

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


def diff_versions(
    pairs: Sequence[VersionPair],
    *,
    batch_keys: frozenset[str] | set[str] = frozenset(),
    batch_discount: float = 0.5,
) -> RegradeDiff:
    """Compare old and new judgments: a failed new one is `failed` (never a grade)."""
    old_grades: list[int] = []
    new_grades: list[int] = []
    changed: list[ChangedPair] = []
    failed: list[dict[str, str]] = []
    pending = batch_graded = no_old_grade = 0
    for pair in pairs:
        new, old = pair.new, pair.old
        if new is None:
            pending += 1
            continue
        batch_graded += new.key in batch_keys
        if new.status != "ok" or new.grade is None:
            error = f"{new.error.type}: {new.error.message}" if new.error else "failed"
            failed.append({"query_id": pair.query_id, "doc_id": pair.doc_id, "error": error})
            continue
        if old is None or old.status != "ok" or old.grade is None:
            no_old_grade += 1
            continue
        old_grades.append(old.grade)
        new_grades.append(new.grade)
        if old.grade != new.grade:
            changed.append(
                ChangedPair(
                    pair.query_id, pair.doc_id, old.grade, new.grade, old.reason, new.reason
                )
            )
    cost, cost_without = _costs(pairs, batch_keys, batch_discount)
    kappa = kappa_of(old_grades, new_grades, len(GRADES))  # NaN when undefined: None
    return RegradeDiff(
        n=len(pairs),
        compared=len(old_grades),
        changed=len(changed),
        kappa_between_versions=None if math.isnan(kappa) else kappa,
        transition=confusion_matrix(old_grades, new_grades, len(GRADES)).astype(int).tolist(),
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
    """The new judgments' cost (each key once) and without the Batch discount; None if unpriced."""
    cost = cost_without = 0.0
    paid: set[str] = set()
    for pair in pairs:
        new = pair.new
        if new is None or new.key in paid:
            continue
        paid.add(new.key)
        if new.cost is None:
            if new.usage.prompt_tokens or new.usage.completion_tokens:
                return None, None
            continue
        cost += new.cost
        cost_without += new.cost / batch_discount if new.key in batch_keys else new.cost
    return round(cost, 10), round(cost_without, 10)


def version_qrels(pairs: Sequence[VersionPair]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(old qrels, new qrels) over the pairs graded ok in both versions."""
    both = [
        (p.old, p.new)
        for p in pairs
        if p.old is not None and p.new is not None and p.old.status == p.new.status == "ok"
    ]
    return qrels_frame(old for old, _ in both), qrels_frame(new for _, new in both)


def metric_deltas(
    pairs: Sequence[VersionPair],
    runs: Mapping[str, pd.DataFrame],
    measures: Sequence[str],
) -> list[dict[str, Any]]:
    """One record per (run, measure): {"run", "measure", "old", "new", "delta"} (new - old)."""
    old_qrels, new_qrels = version_qrels(pairs)
    records: list[dict[str, Any]] = []
    if old_qrels.empty:
        return records
    # Names without (rel=N) take the 0..3 scale's threshold (2) on both sides, whatever they reach.
    parsed = [parse_measure(m) for m in measures]
    for name, run in runs.items():
        with warnings.catch_warnings():
            # A version whose grades all stay below the threshold scores 0: a delta, not a mistake.
            warnings.simplefilter("ignore", RelgradeWarning)
            old = mean_scores(evaluate(old_qrels, run, parsed))
            new = mean_scores(evaluate(new_qrels, run, parsed))
        for measure, before, after in zip(old["measure"], old["value"], new["value"], strict=True):
            records.append(
                {
                    "run": name,
                    "measure": str(measure),
                    "old": float(before),
                    "new": float(after),
                    "delta": float(after) - float(before),
                }
            )
    return records
