"""How a regrade moves each run's scores, over the pairs graded ok in both versions (a pair failed
or pending on one side would count as unjudged there only and fake a delta)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from grader.errors import RelgradeWarning
from grader.io.judgments import qrels_frame
from grader.metrics import evaluate, mean_scores, parse_measure
from grader.regrade.diff import VersionPair


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
    # LLM grades are on the 0..3 scale: names without (rel=N) take its threshold (2) on both
    # sides, whatever grades one version happens to reach.
    parsed = [parse_measure(m) for m in measures]
    for name, run in runs.items():
        with warnings.catch_warnings():
            # A version whose grades all stay below the threshold scores 0: that is the delta
            # this table shows, not a mistake to warn about.
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
