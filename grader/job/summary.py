"""What a grade job says: the one-line summary of a run, a dry run's estimate, and the store's
waits for its lock."""

from __future__ import annotations

from grader.cost import cost_range, spend_text
from grader.grading.pipeline import GradingReport
from grader.store.busy import StoreBusyEvent


def _fmt_tokens(report: GradingReport) -> str:
    u = report.usage
    total = u.prompt_tokens + u.completion_tokens
    said = report.cached_reported is not False or not total
    cached = f"cached {u.cached_tokens:,}" if said else "cached not reported"
    return (
        f"tokens {total:,} (prompt {u.prompt_tokens:,}, completion {u.completion_tokens:,}, "
        f"{cached})"
    )


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
    line = (
        f"graded {report.graded}{asked}, cached {report.cached}{stored}, "
        f"failed {report.failed}, {_fmt_tokens(report)}, cost {cost}"
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
