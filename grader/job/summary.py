"""What a grade job says: the one-line summary of a run, a dry run's estimate, the store's
waits for its lock, and the failed pairs: their causes and whether a rerun can fix them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from grader.cost import cost_range, spend_text
from grader.grading.pipeline import GradingReport
from grader.models import Judgment
from grader.store.busy import StoreBusyEvent

if TYPE_CHECKING:  # grader.judges.failures loads the openai SDK: only when a pair failed
    from grader.judges.failures import FailureKind

_EXAMPLE_CHARS = 200


def _by_judge(label: str, counts: dict[str, int]) -> str:
    """` (LABEL: judge-a 200, judge-b 0)`, judges in order, or "" when there are none."""
    listed = ", ".join(f"{judge} {n}" for judge, n in counts.items())
    return f" ({label}: {listed})" if listed else ""


def summary_line(report: GradingReport) -> str:
    """The one-line summary: graded, cached, failed (pairs), tokens, cost, the answers per judge
    (several judges), per server (several servers), and those another process paid for."""
    judges = sorted({*report.stored_by_judge, *report.asked_by_judge})
    asked = stored = ""
    if len(judges) > 1:
        asked = _by_judge("answers asked", {j: report.asked_by_judge.get(j, 0) for j in judges})
        stored = _by_judge("answers stored", {j: report.stored_by_judge.get(j, 0) for j in judges})
    cost = spend_text(report.cost, report.unpriced, local=report.local)
    u = report.usage
    total = u.prompt_tokens + u.completion_tokens
    said = report.cached_reported is not False or not total
    cached = f"cached {u.cached_tokens:,}" if said else "cached not reported"
    line = (
        f"graded {report.graded}{asked}, cached {report.cached}{stored}, "
        f"failed {report.failed}, tokens {total:,} (prompt {u.prompt_tokens:,}, completion "
        f"{u.completion_tokens:,}, {cached}), cost {cost}"
    )
    if report.pending:
        line += f", not done {report.pending}"
    if report.answers_by_server:
        line += "; answers: " + ", ".join(f"{u} {n}" for u, n in report.answers_by_server.items())
    if report.adopted:
        line += (
            f"; {report.adopted} answers were paid by another process sharing the store "
            "during this run (taken from the store, not paid again)"
        )
    return line


def dry_run_text(report: GradingReport, verify: bool, verbose: bool, also: str | None) -> str:
    """A dry run's estimate, with `also` (e.g. the holes it would fill)."""
    est = report.estimate
    assert est is not None
    shared = ""
    if report.shared:
        shared = f"; {report.shared} pairs share a text with another pair (sent once)"
    lines = [
        f"dry run: {report.pairs} pairs; answers already stored: {report.stored_ok} ok, "
        f"{report.stored_failed} failed (to retry); {report.cached} pairs need no request" + shared,
        f"would send {est.requests} requests: about {est.prompt_tokens:,} prompt tokens; "
        f"completion tokens about {est.expected_completion_tokens:,} expected, at most "
        f"{est.completion_tokens:,} (the ceiling: every reply at the prompt's max_tokens)",
        f"estimated cost {cost_range(est.expected_cost, est.cost)}; --max-cost reserves the "
        "ceiling before each request",
    ]
    lines += [f"expected completion of {basis}" for basis in est.basis]
    if verify:
        lines.append("plus one verification request per pair graded 0-1 (not known in advance)")
    lines.append("nothing was sent")
    if also:
        lines.append(also)
    if not verbose and report.to_send:
        lines.append("--verbose lists the pairs that would be sent")
    return "\n".join(lines)


def busy_text(event: StoreBusyEvent) -> str:
    """One line about a wait for the store (started, still going, journaled, or over)."""
    if event.over:
        text = f"store free again after {event.waited_s:.1f} s: {event.path}"
        if event.journaled:
            text += f" ({event.journaled} answers went through the journal; all stored)"
        return text
    text = (
        f"store busy, waiting (held by another process): {event.path}, {event.what}, "
        f"{event.waited_s:.0f} s so far"
    )
    kept = []
    if event.held:
        kept.append(f"{event.held} answers kept in memory")
    if event.journaled:
        kept.append(f"{event.journaled} in the journal {event.journal}")
    if kept:
        text += "; " + ", ".join(kept) + " until it is free"
    return text


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
    from grader.judges.failures import failure_kind

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
    from grader.judges.failures import failure_cause

    counts: dict[str, int] = {}
    for judgment in judgments:
        if judgment.status == "failed":
            cause = failure_cause(judgment.error)
            counts[cause] = counts.get(cause, 0) + 1
    if not counts:
        return ""
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return f"failed {sum(counts.values())}: " + ", ".join(f"{c} ×{n}" for c, n in ranked)
