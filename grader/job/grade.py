"""The grade job, one path for `relgrade grade` and `relgrade.grade`: options, pairs, judges,
grading, outcome, outputs. It tells through callbacks (`Tell`) and never prints; each outcome has
one wording, said by the command on stderr and by the API as a warning or an exception."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.errors import InputError
from grader.grading import run as grading_run
from grader.grading.events import ProgressCallback
from grader.grading.pairs import PairSelection, pairs_to_grade
from grader.grading.pipeline import GradingReport, StoreWriter, grade_pairs
from grader.io.python_inputs import is_path
from grader.job import people
from grader.job.judges import GradeJudges, check_judge_args, prompt_notes
from grader.job.judgments_and_qrels import (
    clean_outputs,
    read_back_unsaved,
    saving_unsaved,
    write_judgments_and_qrels,
)
from grader.job.options import GradeOptions, refuse_clashes
from grader.job.summary import dry_run_text, failed_pairs_text, failure_causes_text
from grader.judges.registry import judge_kind
from grader.prompts import OUTPUT_MODES
from grader.spelling import option
from grader.store.busy import StoreBusyEvent
from grader.store.store import Store


class Outcome(enum.Enum):
    """How a grade run ended."""

    DONE = "done"
    FAILED = "failed"
    HELD_ELSEWHERE = "held elsewhere"
    BUDGET = "budget"
    INTERRUPTED = "interrupted"

    @property
    def exit_code(self) -> int:
        """The command's exit status."""
        return {"done": 0, "budget": 3, "interrupted": 130}.get(self.value, 1)


@dataclass
class Tell:
    """Where the job's reports go: `say` its notes, `notice` the judges' notices about the
    server (None: a RelgradeWarning), `busy` the store's waits for its lock."""

    say: Callable[[str], None]
    notice: Callable[[str], None] | None = None
    busy: Callable[[StoreBusyEvent], None] | None = None
    progress: ProgressCallback | None = None


@dataclass
class GradeResult:
    """A finished grade job: its report, outcome and the plan on people's labels, if any."""

    report: GradingReport
    outcome: Outcome
    options: GradeOptions
    plan: people.Plan | None
    verify: bool

    def holes_text(self) -> str:
        """The holes report, on top of people's labels ("" without)."""
        return people.summary(self.plan, self.report) if self.plan is not None else ""

    def causes_text(self) -> str:
        """The causes of the failures ("" when none failed)."""
        if not self.report.failed:
            return ""
        return failure_causes_text(self.report.judgments)

    def estimate_text(self) -> str:
        """A dry run's estimate, with the holes it would fill."""
        plan, r = self.plan, self.report
        also = people.summary(plan, r, dry_run=True) if plan is not None else None
        return dry_run_text(r, self.verify, self.options.verbose, also)

    def outcome_text(self, resume: str) -> str:
        """The one wording of the outcome ("" when every pair was graded); `resume` says how
        to run the job again (the command line, or a call)."""
        r, o = self.report, self.options
        done = f"{r.done()} of {r.pairs} pairs done and stored"
        if self.outcome is Outcome.INTERRUPTED:
            return interrupted_text(r.done(), r.pairs, resume)
        if self.outcome is Outcome.HELD_ELSEWHERE:
            left = f"{done}; outputs not written. Once that process is done (or gone)"
            return f"{held_text(r.held_elsewhere, o.store)}; {left}, {resume}"
        if self.outcome is Outcome.BUDGET:
            flag = option("--max-cost", "max_cost")
            return (
                f"stopped before exceeding {flag} ${o.max_cost:g}: spent ${r.cost:.4f}, {done},"
                f" {r.pending} left; outputs not written. {option('Rerun', 'Call')} again with a"
                f" higher {flag} to finish (stored answers cost nothing)"
            )
        if self.outcome is not Outcome.FAILED:
            return ""
        return failed_pairs_text(r.judgments)


def held_text(held: int, store: str) -> str:
    """Pairs left to another process sharing the store, which holds them but has not answered."""
    return (
        f"{held} pairs are being graded by another process sharing the store ({store}) that"
        f" has not answered them in {grading_run.HOLD_WAIT_S / 60:.0f} minutes"
    )


def interrupted_text(done: int, total: int, resume: str) -> str:
    """What an interrupted run tells: the pairs done and stored, and how to resume."""
    return f"interrupted: {done} of {total} pairs done and stored; to resume, {resume}"


def outcome_of(report: GradingReport) -> Outcome:
    """The outcome of a report, classified once."""
    if report.interrupted:
        return Outcome.INTERRUPTED
    if report.held_elsewhere:
        return Outcome.HELD_ELSEWHERE
    if report.budget_reached:
        return Outcome.BUDGET
    return Outcome.FAILED if report.failed else Outcome.DONE


def check_options(o: GradeOptions, also_judged: people.AlsoJudged) -> None:
    """Raise InputError for options that cannot go together or hold a bad value."""
    for name in ("concurrency", "max_attempts"):
        if getattr(o, name) < 1:
            raise InputError(f"{_flag(name)} must be at least 1")
    if o.max_cost is not None and o.max_cost < 0:
        raise InputError(f"{_flag('max_cost')} must not be negative")
    check_judge_args(o)
    if o.output_mode not in OUTPUT_MODES:
        raise InputError(f"{_flag('output_mode')}: no mode {o.output_mode!r}")
    if (o.verify_prompt or o.verify_model) and not o.verify_low:
        raise InputError("--verify-prompt/--verify-model need --verify-low")
    _refuse_clashes(o, also_judged)
    # Fail before grading (and paying) when an output or the store could not be written.
    for name in ["out", "qrels_out", "merged_out"] + ([] if o.dry_run else ["store"]):
        if (value := getattr(o, name)) is None:  # (a dry run never creates a store)
            continue
        path = Path(value)
        if not (path.parent if str(path.parent) else Path(".")).is_dir():
            raise InputError(
                f"{_flag(name)}: the folder does not exist", path=path, hint="create it first"
            )
        if path.is_dir():
            raise InputError(f"{_flag(name)}: is a folder, not a file", path=path)


def _flag(name: str) -> str:
    """An option as the command or the API spells it (`--max-cost` or `max_cost`)."""
    return option("--" + name.replace("_", "-"), name)


def _refuse_clashes(o: GradeOptions, also_judged: people.AlsoJudged) -> None:
    def paths(values: list[object]) -> list[str]:
        return [str(v) for v in values if is_path(v)]

    refuse_clashes(
        [
            ("--run", paths(o.run)),
            ("--skip-judged", paths(o.skip_judged)),
            ("--queries", paths([o.queries])),
            ("--docs", paths([o.docs])),
        ],
        [
            ("--out", o.out),
            ("--qrels-out", o.qrels_out),
            ("--merged-out", o.merged_out),
            ("--also-judged's manifest", list(people.manifest_paths(o, also_judged))),
            ("--store", o.store),
        ],
    )


def select_pairs(
    o: GradeOptions, plan: people.Plan | None, say: Callable[[str], None]
) -> tuple[PairSelection, dict[str, Any]]:
    """The pairs the options select, and the docs the lexical judge needs (all of them). The
    queries and documents are those given, else `dataset`'s."""
    from grader.io.docs import all_docs, docs_of, queries_of

    queries, docs = o.queries, o.docs
    if (queries is None or docs is None) and o.dataset:
        from grader.io.datasets import load_dataset, require

        dataset = load_dataset(o.dataset)
        for part, given in (("queries", queries), ("docs", docs)):
            if given is None:
                require(dataset, o.dataset, part)
        queries = dataset if queries is None else queries
        docs = dataset if docs is None else docs
    if queries is None or docs is None:
        raise InputError(
            option("grade needs --queries and --docs", "runs= needs queries= and docs="),
            hint=option(
                "or --dataset ID (an ir_datasets id)",
                "paths, dicts, DataFrames or an ir_datasets dataset",
            ),
        )
    # The lexical judge's collection statistics need every document; an LLM judge needs only
    # those of the selected pairs, so a large docs file (or collection) is streamed and the
    # rest not kept.
    lexical = judge_kind(o.judge).needs_all_docs
    texts = all_docs(docs) if lexical else {}
    selection = pairs_to_grade(
        o.run,
        queries_of(queries),
        texts if lexical else docs_of(docs),
        depth=o.depth,
        skip_judged=[] if plan is not None else o.skip_judged,
        skip_missing=o.skip_missing,
        **people.selection_kwargs(plan),
    )
    if plan is not None:
        people.take_selection(plan, selection)
    if selection.missing:
        say(f"skipped {selection.missing} pairs with unknown ids")
    return selection, texts


class GradeJob:
    """One grade run: the options checked and the pairs selected at once, graded by `run`."""

    def __init__(
        self,
        options: GradeOptions,
        also_judged: people.AlsoJudged,
        tell: Tell,
        selection: tuple[PairSelection, dict[str, Any]] | None = None,
    ):
        """`selection`: pairs the caller chose with their documents (else the runs')."""
        check_options(options, also_judged)
        self.options, self.tell = options, tell
        if not options.dry_run:
            o = options
            paths = [o.out, o.qrels_out, o.merged_out, *people.manifest_paths(o, also_judged)]
            for line in clean_outputs(paths):
                tell.say(line)
        self.plan = people.plan(options, also_judged) if selection is None else None
        if selection is None:
            selection = select_pairs(options, self.plan, tell.say)
        self.selection, self.docs = selection

    async def run(self, **pipeline: Any) -> GradeResult:
        """Grade the pairs with the store and write the outputs when every pair is done;
        `pipeline` goes to `grade_pairs` (Ctrl-C handling, a stop button)."""
        o, tell = self.options, self.tell
        path = Path(o.store)
        # A dry run never creates a store; it reads one if it exists.
        store = None if o.dry_run and not path.exists() else Store(path, on_busy=tell.busy)
        judges: GradeJudges | None = None
        try:
            # An LLM's answers are paid: each is journaled as it arrives (a kill loses none).
            writer = StoreWriter(store, durable=judge_kind(o.judge).takes_model)
            judges = GradeJudges(o, self.docs, writer, tell.say, tell.notice)
            if store is not None:  # keys masked, prompts checked, a full disk's --out read back
                store.add_secrets(judges.secrets)
                notes = prompt_notes(store, judges.prompts(), allow_changed=o.allow_changed_prompt)
                for note in notes:
                    tell.say(note)
                if not o.dry_run and (found := read_back_unsaved(store, o.out)):
                    tell.say(f"{found:,} paid answers a full disk left in {o.out} are now stored")
            # A full disk stops the run: paid answers no journal took go to --out (and are said).
            with saving_unsaved(o.out, writer, tell.say):
                report = await grade_pairs(
                    self.selection.pairs,
                    judges.members,
                    store=store,
                    writer=writer,
                    verify_judge=judges.verifier,
                    concurrency=o.concurrency,
                    max_cost=o.max_cost,
                    dry_run=o.dry_run,
                    progress=tell.progress,
                    secrets=judges.secrets,
                    stream_final=True,
                    before_sending=judges.check_key,
                    **pipeline,
                )
            judges.report_servers(report)
        finally:
            if judges is not None:
                await judges.aclose()
            if store is not None:
                store.close()
        result = GradeResult(report, outcome_of(report), o, self.plan, judges.verifier is not None)
        if not o.dry_run and result.outcome in (Outcome.DONE, Outcome.FAILED):
            blocks = report.blocks()
            write_judgments_and_qrels(blocks, o.out, o.qrels_out, **people.writer_args(self.plan))
        return result
