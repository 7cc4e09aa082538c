"""What `regrade` (and `batch collect`, for the jobs a regrade submitted) prints and writes: the
diff between versions as a table or JSON, --out/--qrels-out, the summary line, what is pending
and what `--batch --no-wait` submitted. `batch collect` rebuilds each version's outcome as the
regrade command that submitted its jobs would (its --select is stored with them)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from grader.batch.api.state import BatchState, Job
from grader.cli.batch_common import batch_command
from grader.cli.stderr import say
from grader.cost import usd_or_unknown
from grader.errors import InputError
from grader.grading.report import GradingReport
from grader.job.endpoint import Settings
from grader.job.grade import held_text
from grader.job.judgments_and_qrels import write_judgments_and_qrels
from grader.job.summary import failure_causes_text
from grader.redact import redact_url
from grader.regrade.diff import RegradeDiff, diff_versions
from grader.regrade.run import RegradeOutcome
from grader.regrade.selection import parse_selection, select_candidates, version_pairs
from grader.store.store import Store

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


def print_outcome(args: argparse.Namespace, outcome: RegradeOutcome) -> int:
    """Print the diff and write the outputs (`print_and_write`), then the summary, the causes of
    failures and what is pending; the exit status: 1 when pairs failed or wait on another
    process, else 0."""
    failed = print_and_write(args, [outcome])
    if not args.quiet:
        say(_summary(outcome))
    if outcome.diff.failed:
        new = [p.new for p in outcome.pairs if p.new is not None]
        say(failure_causes_text(new))
    if not outcome.diff.pending:
        return failed
    report = outcome.report  # pairs held by another live process; the rest wait in batches
    held = 0
    if report and report.held_elsewhere:
        held = max(0, outcome.diff.pending - outcome.waiting_in_batches)
    if held:
        again = "rerun this same command once that process is done (or gone)"
        say(f"{held_text(held, args.store)}; {again}")
    if outcome.diff.pending > held:
        say(
            f"{outcome.diff.pending - held} pairs are waiting in batches; "
            f"`{batch_command('status', args.store, args.api_key_env)}` shows them, "
            f"`{batch_command('collect', args.store, args.api_key_env)}` "
            "(or this command again) collects them"
        )
    return 1 if held else 0


def submitted_json(args: argparse.Namespace, outcome: RegradeOutcome) -> dict[str, Any]:
    """`regrade --batch --no-wait` in JSON: the diff so far plus `submitted` and the commands
    that follow it, `status` and `follow` (docs/regrade-and-batch.md)."""
    from grader.batch.api.state import public_base_url

    url = Settings.from_args(args).base_url or "https://api.openai.com/v1"
    data = diff_json(outcome)
    data["submitted"] = {
        "requests": outcome.requests,
        "pairs": outcome.sent,
        "batches": len(outcome.job_ids),
        "files": len(outcome.job_ids),  # one input file per batch
        "jobs": outcome.job_ids,
        "base_url": public_base_url(url),
    }
    data["status"] = batch_command("status", args.store, args.api_key_env)
    data["follow"] = batch_command("collect", args.store, args.api_key_env)
    return data


def print_submitted(args: argparse.Namespace, outcome: RegradeOutcome) -> int:
    """`--no-wait` with pairs pending: one line (or the JSON) saying what was submitted and
    the command that collects it, instead of a diff of nothing."""
    data = submitted_json(args, outcome)
    if args.format == "json":
        print(json.dumps(data, indent=2))
        return 0
    sub = data["submitted"]
    batches = f"{sub['batches']} batch" + ("es" if sub["batches"] != 1 else "")
    files = f"{sub['files']} input file" + ("s" if sub["files"] != 1 else "")
    line = (
        f"submitted {sub['requests']} requests ({sub['pairs']} pairs) in {batches} "
        f"({files}) to {redact_url(sub['base_url'])}"
    )
    if outcome.waiting_in_batches:
        line += f", {outcome.waiting_in_batches} pairs waiting in earlier batches"
    line += f"; follow with: {data['follow']}"
    print(line)
    if args.out or args.qrels_out:
        say(OUTPUTS_PENDING)
    return 0


def _summary(outcome: RegradeOutcome) -> str:
    how = "batch" if outcome.collected is not None or outcome.job_ids else "live"
    line = (
        f"regrade: {len(outcome.candidates)} pairs selected, {outcome.sent} sent as "
        f"{outcome.requests} requests ({how}), {outcome.already_done} already regraded"
    )
    if outcome.waiting_in_batches:
        line += f", {outcome.waiting_in_batches} waiting in earlier batches"
    collected = outcome.collected
    if collected is not None and collected.jobs:
        line += (
            f"; collected {collected.jobs} batch{'' if collected.jobs == 1 else 'es'}: "
            f"{collected.batch} from the batch, "
            f"{collected.live} re-asked live, {collected.failed} failed"
        )
    return line


def add_output_options(p: argparse.ArgumentParser) -> None:
    """What regrade (and collect, for it) writes and shows: --out, --qrels-out, --format, --show."""
    p.add_argument("--out", metavar="J.jsonl", help="write the new judgments (JSONL)")
    p.add_argument("--qrels-out", metavar="QRELS", help="write the new grades as TREC qrels")
    p.add_argument("--format", choices=["table", "json"], default="table", help="diff format")
    p.add_argument("--show", type=int, default=20, metavar="N", help="changed pairs shown (20)")


def _config_id(config: dict[str, Any]) -> str:
    return json.dumps(config, sort_keys=True)


def job_versions(jobs: Sequence[Job]) -> list[dict[str, Any]]:
    """The distinct judge configurations of `jobs` (one per version they regrade), in order."""
    found: dict[str, dict[str, Any]] = {}
    for job in jobs:
        found.setdefault(_config_id(job.judge_config), job.judge_config)
    return list(found.values())


def check_one_version(args: argparse.Namespace, versions: Sequence[dict[str, Any]]) -> None:
    """--out/--qrels-out hold one version: refuse them before collecting jobs of several."""
    if len(versions) > 1 and (args.out or args.qrels_out):
        listed = ", ".join(f"{v.get('prompt_id')} ({v.get('model')})" for v in versions)
        raise InputError(
            f"the open jobs regrade {len(versions)} versions ({listed}); --out/--qrels-out "
            "hold one",
            hint="collect without --out/--qrels-out, then rerun each `regrade` command to "
            "write its outputs (it sends nothing for pairs already regraded)",
        )


def version_outcome(
    store: Store, state: BatchState, config: dict[str, Any], batch_discount: float
) -> RegradeOutcome:
    """The regrade of one version as its command would see it now: selection, pairs, diff."""
    select = config.get("select")
    candidates = select_candidates(store, parse_selection(select or []), config["fingerprint"])
    if select is None:  # a job stored before its --select was: the pairs of its jobs
        keys = {
            item.key
            for job in state.jobs()
            if _config_id(job.judge_config) == _config_id(config)
            for item in state.items(job.job_id)
        }
        candidates = [c for c in candidates if c.new_key in keys]
    pairs = version_pairs(store, candidates)
    diff = diff_versions(
        pairs, batch_keys=state.keys_with_outcome("batch"), batch_discount=batch_discount
    )
    return RegradeOutcome(candidates=candidates, pairs=pairs, diff=diff)


def print_and_write(args: argparse.Namespace, outcomes: Sequence[RegradeOutcome]) -> int:
    """Print each version's diff (stdout) and write the outputs of a finished one (--out: the
    new judgments, --qrels-out: their ok grades); 1 when some new judgment failed, else 0."""
    if args.format == "json":
        data = [diff_json(outcome) for outcome in outcomes]
        print(json.dumps(data[0] if len(data) == 1 else data, indent=2))
    else:
        print("\n\n".join(render_table(o.diff, show=args.show) for o in outcomes))
    for outcome in outcomes:
        if not (args.out or args.qrels_out):
            continue
        if outcome.diff.pending:
            say(OUTPUTS_PENDING)
        else:
            new = [p.new for p in outcome.pairs if p.new is not None]
            blocks = GradingReport(judgments=new).blocks()
            write_judgments_and_qrels(blocks, args.out, args.qrels_out)
    return 1 if any(o.diff.failed for o in outcomes) else 0
