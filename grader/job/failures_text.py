"""What a run tells about its failed pairs: how many, their causes, and whether a rerun can fix
them: only a transient failure is likely to go away, and saying "rerun" of a permanent one would
send the user round in circles (the kinds are `grader.judges.failures`')."""

from __future__ import annotations

from collections.abc import Sequence

from grader.judges.failures import FailureKind, failure_cause, failure_kind
from grader.models import Judgment

_EXAMPLE_CHARS = 200


def _example(judgment: Judgment) -> str:
    error = judgment.error
    what = f"{error.type}: {error.message}" if error is not None else "no error recorded"
    if len(what) > _EXAMPLE_CHARS:
        what = what[: _EXAMPLE_CHARS - 3] + "..."
    return f"e.g. query {judgment.query_id} doc {judgment.doc_id}: {what}"


_LABELS: dict[FailureKind, str] = {
    "transient": "on transport or server errors (timeouts, connections, 429, 5xx)",
    "invalid": "with no valid reply after every re-ask",
    "permanent": "permanently",
    "unknown": "with errors relgrade does not classify",
}


def _advice(kind: FailureKind, group: list[Judgment]) -> str:
    if kind == "transient":
        return "rerunning the same command retries them"
    if kind == "unknown":
        return f"read the error to see whether a rerun can help ({_example(group[0])})"
    if kind == "invalid":
        return (
            "rerunning the same command retries them, but the model may answer the same way "
            f"({_example(group[0])})"
        )
    return (
        "the same input fails the same way every time, so rerunning will not change them; grade "
        f"them with another judge or prompt, or leave them out ({_example(group[0])})"
    )


def failed_pairs_text(judgments: Sequence[Judgment]) -> str:
    """The summary of the failed judgments among `judgments` (empty when none failed)."""
    groups: dict[FailureKind, list[Judgment]] = {}
    for judgment in judgments:
        if judgment.status == "failed":
            groups.setdefault(failure_kind(judgment.error), []).append(judgment)
    kinds = [kind for kind in _LABELS if kind in groups]
    if len(kinds) == 1:
        kind = kinds[0]
        group = groups[kind]
        return (
            f"{len(group)} pairs failed {_LABELS[kind]} and are left out of the qrels; "
            f"{_advice(kind, group)}"
        )
    lines = [f"{sum(len(g) for g in groups.values())} pairs failed and are left out of the qrels:"]
    lines += [f"  {len(groups[k])} {_LABELS[k]}: {_advice(k, groups[k])}" for k in kinds]
    return "\n".join(lines) if kinds else ""


def failure_causes_text(judgments: Sequence[Judgment]) -> str:
    """The text "failed N: CAUSE ×n, CAUSE ×m" over the failed judgments among `judgments`, the most
    frequent cause first (empty when none failed)."""
    counts: dict[str, int] = {}
    for judgment in judgments:
        if judgment.status == "failed":
            cause = failure_cause(judgment.error)
            counts[cause] = counts.get(cause, 0) + 1
    if not counts:
        return ""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return f"failed {sum(counts.values())}: " + ", ".join(f"{c} ×{n}" for c, n in ranked)
