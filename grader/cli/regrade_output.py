"""What `regrade` (and `batch collect`, for the jobs a regrade submitted) prints and writes: the
diff between versions as a table or JSON, and --out/--qrels-out."""

from __future__ import annotations

import argparse
from typing import Any

from grader.cost import usd_or_unknown
from grader.regrade.diff import RegradeDiff
from grader.regrade.run import RegradeOutcome


def write_outputs(args: argparse.Namespace, outcome: RegradeOutcome) -> None:
    """Write --out (the new judgments) and --qrels-out (their ok grades) of a regrade."""
    from grader.io.output_set import OutputSet

    new = [p.new for p in outcome.pairs if p.new is not None]
    outputs = OutputSet([p for p in (args.out, args.qrels_out) if p])
    outputs.begin()  # a kill between the two files is told to the next run
    if args.out:
        from grader.io.judgments import write_judgments

        write_judgments(args.out, new)
        outputs.done(args.out)
    if args.qrels_out:
        from grader.io.judgments import qrels_frame
        from grader.io.trec import write_qrels

        write_qrels(args.qrels_out, qrels_frame(new))
    outputs.finish()


OUTPUTS_PENDING = (
    "--out/--qrels-out not written while pairs are pending (earlier files are left as they "
    "were); rerun this same command once they are graded to write them (it sends nothing "
    "for pairs already regraded)"
)


def diff_json(outcome: RegradeOutcome) -> dict[str, Any]:
    """The diff of `--format json`: the diff's keys, then what was selected and sent."""
    data = outcome.diff.to_json()
    data.update(
        selected=len(outcome.candidates),
        sent=outcome.sent,
        requests=outcome.requests,
        already_done=outcome.already_done,
        waiting_in_batches=outcome.waiting_in_batches,
        jobs=outcome.job_ids,
    )
    return data


def _fmt(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def render_table(diff: RegradeDiff, *, show: int = 20) -> str:
    """The diff as plain text: summary, transition matrix, changed pairs, metric deltas."""
    lines = [
        f"pairs {diff.n}, compared {diff.compared}, changed {diff.changed}, "
        f"failed {diff.failed}, pending {diff.pending}"
        + (f", graded where the old had no grade {diff.no_old_grade}" if diff.no_old_grade else ""),
        f"kappa between versions (Cohen's) {_fmt(diff.kappa_between_versions)}",
        f"cost {usd_or_unknown(diff.cost)} "
        f"(without the batch discount {usd_or_unknown(diff.cost_without_batch)}; "
        f"{diff.batch_graded} graded by batch)",
        "",
        "transition (rows: old grade, columns: new grade)",
        "        " + "".join(f"{'new ' + str(g):>8}" for g in range(4)),
    ]
    for g, row in enumerate(diff.transition):
        lines.append(f"{'old ' + str(g):>8}" + "".join(f"{c:>8}" for c in row))
    if diff.changed_pairs:
        lines += ["", f"changed pairs ({min(show, diff.changed)} of {diff.changed} shown)"]
        for c in diff.changed_pairs[:show]:
            lines.append(f"  {c.query_id}  {c.doc_id}  {c.old_grade} -> {c.new_grade}")
            lines.append(f"      old: {_one_line(c.old_reason)}")
            lines.append(f"      new: {_one_line(c.new_reason)}")
    if diff.failed_pairs:
        lines += ["", "failed (rerun to retry)"]
        for f in diff.failed_pairs[:show]:
            lines.append(f"  {f['query_id']}  {f['doc_id']}  {f['error']}")
    if diff.metric_deltas:
        lines += ["", f"{'run':<20}{'measure':<18}{'old':>8}{'new':>8}{'delta':>9}"]
        for d in diff.metric_deltas:
            lines.append(
                f"{d['run']:<20}{d['measure']:<18}{d['old']:>8.4f}{d['new']:>8.4f}"
                f"{d['delta']:>+9.4f}"
            )
    return "\n".join(lines)


def _one_line(text: str | None, width: int = 100) -> str:
    if not text:
        return "-"
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."
