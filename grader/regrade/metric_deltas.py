"""How a regrade moves each run's scores: every measure under the old and the new grades.

Both qrels hold the same pairs, those graded ok in both versions (a pair failed or pending in
either version would otherwise count as unjudged on one side only and fake a delta).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from grader.metrics import evaluate, mean_scores
from grader.regrade.diff import VersionPair


def version_qrels(pairs: Sequence[VersionPair]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(old qrels, new qrels) over the pairs graded ok in both versions."""
    rows_old: list[tuple[str, str, int]] = []
    rows_new: list[tuple[str, str, int]] = []
    for pair in pairs:
        old, new = pair.old, pair.new
        if old is None or new is None or old.grade is None or new.grade is None:
            continue
        if old.status != "ok" or new.status != "ok":
            continue
        rows_old.append((pair.query_id, pair.doc_id, old.grade))
        rows_new.append((pair.query_id, pair.doc_id, new.grade))
    columns = ["query_id", "doc_id", "grade"]
    return pd.DataFrame(rows_old, columns=columns), pd.DataFrame(rows_new, columns=columns)


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
    for name, run in runs.items():
        old = mean_scores(evaluate(old_qrels, run, measures))
        new = mean_scores(evaluate(new_qrels, run, measures))
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
