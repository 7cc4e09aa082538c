"""`relgrade regrade`: grade stored pairs again under a new prompt or model, and show what changed.
Both versions stay in the store; `--batch` jobs are recorded there, so `relgrade batch collect` or
this command again continues them after the process exits."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from grader import defaults
from grader.batch.adapter import LLMBatchJudge, job_config
from grader.cli.batch_common import (
    JudgeFactory,
    add_batch_options,
    make_runner,
    progress_printer,
)
from grader.cli.flags import (
    add_allow_changed_prompt,
    add_command,
    add_judge_options,
    add_llm_options,
    add_measures,
    add_runs,
    add_select,
    add_store,
)
from grader.cli.regrade_output import (
    add_output_options,
    print_outcome,
    print_submitted,
)
from grader.cli.stderr import (
    clean_outputs,
    interrupt_at_once,
    open_store,
    report_interrupted,
    say,
)
from grader.cost import cost_range
from grader.display.progress import GradingProgress
from grader.errors import InputError, PromptError
from grader.job.endpoint import Settings
from grader.job.judges import check_regrade_judge, llm_judges, prompt_notes
from grader.job.options import refuse_clashes
from grader.judges.llm.judge import LLMJudge
from grader.judges.registry import JudgeSettings, judge_kind
from grader.models import PromptRef
from grader.prompts import PromptSpec, load_prompt
from grader.regrade.run import RegradeOutcome, regrade
from grader.regrade.selection import Criterion, absolute_selection, parse_selection
from grader.store.store import Store
from grader.store.writer import StoreWriter

EPILOG = """\
--select (criteria combine; all must hold): all (default) | failed | grade<=N | sample FILE
(a sample CSV with query_id,doc_id, TREC qrels or run, or `qid docid` lines) | disagreement
(an ensemble's judges or a verification disagreed, or one of them failed) | prompt=OLD
(judgments of that prompt: name, name@version or file stem). The old version of a pair is its
latest stored OUTPUT judgment that is not the new version: an ensemble's combined judgment or a
verified one when `grade` made one, never a member's or the verifier's answer alone.

A rerun sends nothing for pairs already regraded; pairs waiting in open batches are not sent
again. --out and --qrels-out are written only when no selected pair is pending: after
--batch --no-wait (or while batches are still open) rerun this command once they are collected
to write them. Exit status: 0 done (or batches left waiting with --no-wait), 1 some pairs failed
(rerun to retry them), 2 bad input.
"""


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "regrade",
        description="Regrade the selected stored pairs and report what changed.",
        epilog=EPILOG,
    )
    add_store(p)
    p.add_argument(
        "--prompt",
        metavar="NAME",
        help="new prompt name or file (default: the prompt of the selected judgments, when "
        "they have one; to change only the model)",
    )
    p.add_argument(
        "--model",
        action="extend",
        nargs="+",
        default=[],
        metavar="M",
        help="new model (default: the model of the selected judgments, as for --prompt; to "
        "change only the prompt); several (--model A B or --model A --model B) make an "
        "ensemble, as in grade (live only, not with --batch)",
    )
    add_select(p, default=["all"])
    p.add_argument("--batch", action="store_true", help="through the Batch API (half price)")
    p.add_argument(
        "--no-wait", action="store_true", help="with --batch: submit and exit; collect later"
    )
    add_output_options(p)
    add_allow_changed_prompt(p)
    add_runs(p, "TREC runs whose metrics are compared old vs new")
    add_measures(p, "measures for --run (default: evaluate's)")
    p.add_argument("--report", metavar="DIFF.html", help="write the diff as an HTML report")
    p.add_argument(
        "--dry-run", action="store_true", help="what would be sent and its cost; send nothing"
    )
    add_judge_options(p)
    add_llm_options(p, several_servers=True)
    add_batch_options(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    refuse_clashes(
        [("--run", args.run)],
        [
            ("--out", args.out),
            ("--qrels-out", args.qrels_out),
            ("--report", args.report),
            ("--store", args.store),
        ],
    )
    criteria = _checked_selection(args)
    with open_store(args.store, "grade") as store:
        spec = settle_prompt_and_models(args, store, criteria)
        from grader.io.python_inputs import run_frames

        runs = run_frames(args.run)
        missing = store.pairs_without_texts()  # left out of every selection: said, not dropped
        if missing:
            say(
                f"note: {missing} stored pairs have no query or document text in the store and"
                " are left out (graded by an early version, or stored without texts); run"
                " `relgrade grade` once more with their --queries/--docs to record the texts"
                " (nothing is re-sent for what is stored)"
            )
        if args.dry_run:
            return _dry_run(args, store, spec, criteria)
        outcome = _regrade_store(args, store, spec, criteria)
    if outcome.report is not None and outcome.report.interrupted:  # live: no batch holds any
        done = outcome.diff.n - outcome.diff.pending
        return report_interrupted(outcome.report, done, outcome.diff.n, quiet=args.quiet)
    if args.no_wait and outcome.diff.pending:
        return print_submitted(args, outcome)
    if runs:
        from grader.metrics import DEFAULT_MEASURES
        from grader.regrade.diff import metric_deltas

        measures = args.measures or list(DEFAULT_MEASURES)
        outcome.diff.metric_deltas = metric_deltas(outcome.pairs, runs, measures)
    if args.report:
        from calibration.report.regrade_diff import write_diff_html

        olds = sorted({str(p.old.prompt) for p in outcome.pairs if p.old and p.old.prompt})
        write_diff_html(
            args.report,
            outcome.diff,
            title="relgrade regrade: what changed",
            old_label=", ".join(olds) or "stored judgments",
            new_label=f"{spec.id} ({', '.join(args.model or [args.judge])})",
        )
    return print_outcome(args, outcome)


def _checked_selection(args: argparse.Namespace) -> list[Criterion]:
    """The --select criteria, once the flags that go together are checked (InputError)."""
    if args.no_wait and not args.batch:
        raise InputError("--no-wait goes with --batch", hint="add --batch or drop --no-wait")
    if args.concurrency < 1:
        raise InputError("--concurrency must be at least 1")
    criteria = parse_selection(args.select)
    check_regrade_judge(args, defaults.PROMPT)
    if args.batch and len(args.model) > 1:
        raise InputError(
            "an ensemble (several --model) regrades live, not through the Batch API",
            hint="drop --batch, or give one --model",
        )
    if args.batch and len(args.base_url or []) > 1:
        raise InputError(
            "several --base-url spread live requests; --batch sends to one endpoint",
            hint="drop --batch, or give one --base-url",
        )
    return criteria


def _regrade_store(
    args: argparse.Namespace, store: Store, spec: PromptSpec, criteria: list[Criterion]
) -> RegradeOutcome:
    """Regrade the selection in the store (--out and --qrels-out cleaned first); on Ctrl-C
    with --batch, say how the submitted batches are collected."""
    clean_outputs([args.out, args.qrels_out])
    # A live LLM's answers are paid: each is journaled as it arrives (a kill loses none).
    writer = StoreWriter(store, durable=judge_kind(args.judge).takes_model)
    try:
        with interrupt_at_once():  # not only a cancelled task: start-up may be waiting
            return asyncio.run(_regrade(args, store, writer, spec, criteria))
    except KeyboardInterrupt:
        if args.batch:
            say(
                "submitted batches keep running on the server and are recorded in the "
                f"store: `relgrade batch collect --store {args.store}` (or this command "
                "again) collects them"
            )
        raise
    finally:
        writer.flush()


async def _regrade(
    args: argparse.Namespace,
    store: Store,
    writer: StoreWriter,
    spec: Any,
    criteria: list[Criterion],
) -> RegradeOutcome:
    offline = not judge_kind(args.judge).takes_model  # no endpoint, no key
    factory = JudgeFactory(args, writer, offline=offline)
    store.add_secrets(factory.secrets)
    judges = factory.judges(spec, args.model)
    live = judges[0]
    try:
        if not args.batch:
            with GradingProgress(enabled=False if args.quiet else None) as bar:
                return await regrade(
                    store,
                    judges,
                    criteria,
                    concurrency=args.concurrency,
                    progress=bar,
                    handle_sigint=True,
                    freeze_gc=True,
                    writer=writer,
                )
        if not isinstance(live, LLMJudge):
            raise InputError(f"judge {args.judge!r} sends no LLM requests to batch")
        batch_judge = LLMBatchJudge(live)
        config = job_config(batch_judge, args.prompt, select=absolute_selection(args.select))
        factory.remember(config, batch_judge)
        runner = make_runner(store, args, factory)
        try:
            return await regrade(
                store,
                live,
                criteria,
                runner=runner,
                batch_judge=batch_judge,
                judge_for=factory.for_job,
                job_config=config,
                wait=not args.no_wait,
                batch_progress=progress_printer(args.quiet),
                batch_discount=factory.prices.batch_discount,
                writer=writer,
            )
        finally:
            await runner.client.close()
            runner.state.close()
    finally:
        await factory.aclose()


def _dry_run(args: argparse.Namespace, store: Store, spec: Any, criteria: list[Criterion]) -> int:
    """Print what a regrade would send and what it would cost, live and by batch."""
    from grader.regrade.run import estimate_regrade

    base = JudgeSettings(prompt=spec, endpoint=Settings.from_args(args))
    judges = llm_judges(args, base, args.model)
    est = estimate_regrade(store, judges, criteria)
    live = cost_range(est.expected_live_cost, est.live_cost)
    batch = cost_range(est.expected_batch_cost, est.batch_cost)
    lines = [
        f"dry run: {est.selected} pairs selected; {est.already_done} already regraded, "
        f"{est.in_batches} waiting in open batches; would send {est.requests} requests for "
        f"{est.pairs} pairs: estimated {live} live, {batch} by batch; nothing was sent",
    ]
    if est.live_cost is not None:
        lines.append("at most: every reply at the prompt's max_tokens (the ceiling)")
    lines += [f"expected completion of {basis}" for basis in est.basis]
    say("\n".join(lines))
    return 0


def settle_prompt_and_models(args: Any, store: Store, criteria: list[Criterion]) -> PromptSpec:
    """The new prompt: --prompt (checked against the store's record of it), else the prompt of
    the selected judgments; --model, when not given, becomes the selection's models."""
    from grader.regrade.selection import old_versions

    takes_model = judge_kind(args.judge).takes_model
    if args.prompt and (args.model or not takes_model):
        spec = load_prompt(args.prompt)
    else:
        prompts, judges = old_versions(store, criteria)
        spec = load_prompt(args.prompt) if args.prompt else stored_prompt(store.path, prompts)
        if not args.model and takes_model:  # the selection's model, never a default one
            args.model = stored_models(store.path, judges)
    if args.prompt:  # a prompt from the store is the text it was graded with
        for note in prompt_notes(store, [spec], allow_changed=args.allow_changed_prompt):
            say(note)
    args.prompt = args.prompt or spec.source  # what batch jobs record to rebuild the judge
    args.model = list(dict.fromkeys(args.model))  # each model once
    return spec


def stored_models(store_path: Path, judges: list[str]) -> list[str]:
    """The model(s) of the selected judgments, when they share them (an ensemble's members in
    order); else an InputError asking for --model."""
    from grader.regrade.selection import judge_models

    if not judges:
        raise InputError(
            "no model to default to: nothing is selected", path=store_path, hint="give --model M"
        )
    found = judge_models(judges[0]) if len(judges) == 1 else None
    if found is None:
        what = f"judges {', '.join(judges)}" if len(judges) > 1 else f"judge {judges[0]}"
        raise InputError(
            f"the selected judgments were graded by {what}: no one model to default to",
            path=store_path,
            hint="give --model M (several make an ensemble), or narrow the selection",
        )
    say(f"model {', '.join(found)} (from the selected judgments; --model to change it)")
    return found


def stored_prompt(store_path: Path, found: list[PromptRef]) -> PromptSpec:
    """The prompt of the selected judgments, when they share one and its file is at hand (a
    shipped prompt of that name@version and sha256); else an InputError asking for --prompt."""
    if not found:
        raise InputError(
            "no prompt to default to: the selected judgments record none (or nothing is selected)",
            path=store_path,
            hint="give --prompt NAME or FILE",
        )
    if len(found) > 1:
        listed = ", ".join(f"{p} (sha256 {p.sha256[:12]})" for p in found)
        raise InputError(
            f"the selected judgments were graded with {len(found)} prompts: {listed}",
            path=store_path,
            hint="give --prompt NAME or FILE, or narrow the selection with --select prompt=OLD",
        )
    ref = found[0]
    try:
        spec = load_prompt(f"{ref.name}@{ref.version}")
    except PromptError:
        spec = None
    if spec is None or spec.sha256 != ref.sha256:
        where = "is not a shipped prompt" if spec is None else f"differs from {spec.source}"
        raise InputError(
            f"the selected judgments were graded with prompt {ref} (sha256 {ref.sha256[:12]}), "
            f"which {where}",
            path=store_path,
            hint="give --prompt FILE with that prompt's file",
        )
    say(f"prompt {ref} (from the selected judgments; --prompt to change it)")
    return spec
