"""`evaluate --fill ... --baseline NAME`: each other run compared with the baseline under the
three regimes, and the corrected difference of the filled scores.

Per regime (holes as non-relevant, judged only, filled), the "all" records get the plain paired
test over queries (`diff`, `p_value`, `p_adjusted`, `diff_ci_low`, `diff_ci_high`, as
`evaluate --baseline`; the correction runs over runs x measures within each regime: each
regime is its own set of labels). The filled records of a run other than the baseline also get
`corrected_diff`, `corrected_diff_ci_low`, `corrected_diff_ci_high` and `corrected_p_value`:
the difference of the two runs' corrected filled scores, estimated jointly on the same
imputations and pairs graded by both (`grader.evaluation.fill.difference`), whose interval carries
the LLM's measured disagreement with people. It is null where either run's interval was
refused (the record's or the baseline's `reason` says why).
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
