"""`evaluate --fill ... --baseline NAME`: per regime, the "all" records get `evaluate --baseline`'s
paired test (corrected within the regime); the filled records add `corrected_diff`, its
interval and `corrected_p_value` (`fill.difference`), null where an interval was refused.
"""

from __future__ import annotations

from typing import Any

from grader.evaluation.baseline import Options, compare
from grader.evaluation.fill.difference import p_value
from grader.evaluation.fill.scores import REGIMES, FillResult

CORRECTED: tuple[str, ...] = ("corrected_diff", "corrected_diff_ci_low", "corrected_diff_ci_high")
CORRECTED += ("corrected_p_value",)


def annotate_fill(
    records: list[dict[str, Any]], result: FillResult, options: Options
) -> list[dict[str, Any]]:
    """`records` (the fill records) with the comparison columns added in place."""
    scored = [r for r in records if "source" not in r]
    for regime in REGIMES:
        results = [(run, regimes[regime]) for run, regimes in result.scores.items()]
        compare(results, options).annotate([r for r in scored if r["regime"] == regime])
    for record in scored:
        if record["regime"] != "filled" or record["query_id"] != "all":
            continue
        if record["run"] == options.baseline:
            continue
        found = result.differences.get(record["run"], {}).get(record["measure"])
        values = (found.estimate, found.low, found.high, p_value(found)) if found else (None,) * 4
        record.update(zip(CORRECTED, values, strict=True))
    return records
