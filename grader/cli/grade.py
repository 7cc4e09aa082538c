"""`relgrade grade`: grade the top results of runs with an LLM (or the offline lexical judge).

Pairs come from the runs (`grader.grading.pairs`), answers from the store when it has them, the rest
from the judge (`grader.grading.pipeline`); outputs are written atomically once every pair is done.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from grader.cli import grade_holes
from grader.cli.commands import COMMANDS
from grader.cli.flags import add_runs, add_store
from grader.cli.grade_summary import print_dry_run, summary_line
from grader.cli.interrupts import interrupted_text, resume_hint
from grader.cli.judge_options import add_judge_options, build_judges, check_judge_args
from grader.cli.progress import GradingProgress
from grader.cli.prompt_check import add_allow_changed_prompt, check_prompts
from grader.cli.settings import Settings, add_llm_options
from grader.cli.store_busy import print_store_busy
from grader.errors import BudgetError, InputError
from grader.grading import run as grading_run
from grader.grading.pairs import pairs_to_grade
from grader.grading.pipeline import StoreWriter, run_grading
from grader.judges.base import Judge
from grader.judges.registry import JudgeSettings, build_judge, judge_kind
from grader.prompts import PromptSpec, load_prompt
from grader.store.store import Store

DEFAULT_PROMPT = "passage"

EPILOG = """\
Models and endpoints: --model defaults to $RELGRADE_MODEL, else gpt-4o-mini. The endpoint is
--base-url, else $OPENAI_BASE_URL, else OpenAI. The key is never a flag and is written nowhere:
$OPENAI_API_KEY goes to OpenAI and to any other server not on this machine; a loopback server
(localhost, 127.0.0.0/8, ::1) gets no key unless --api-key-env NAME asks for the key in $NAME
(sent to any server). A server other than api.openai.com needs no key (vLLM, Ollama, llama.cpp
server, here or on another host): without one it gets a placeholder.

Several --model: an ensemble. Each model's answer is stored under its own key; the output
records every model's grade, their disagreement (max - min) and the aggregate, the lower median
(with an even count the lower middle grade, so never an invented grade). Models that failed on
a pair are left out of its aggregate; the pair fails only when all of them failed.

--verify-low: pairs graded 0 or 1 are graded again by --verify-prompt and/or --verify-model
(at least one must differ from the first judge). Both answers are kept in `verification`; the
verifier's grade is final when it answered, else the first grade stands.

Store: answers are kept in --store (SQLite) by content key; a rerun reuses every ok answer
(zero requests when nothing changed) and retries the failed ones. Kill the run at any moment
and rerun the same command to finish it.

Deadlines: --timeout bounds each whole request (a server trickling its reply is cut off there
and the request retried as a timeout). After max(16, 2 x --concurrency) timeouts or failed
connections in a row with no answer in between, the server counts as not answering: the run
stops (exit 2) naming its URL; every answer received is stored, unfinished pairs are not marked
failed, and rerunning the same command does them.

Exit status: 0 every pair graded; 1 some pairs failed (the summary says how many and whether a
rerun can help; they are left out of the qrels, and rerunning the same command retries them);
2 bad input, or the server stopped answering; 3 --max-cost reached before the end; 130
interrupted by Ctrl-C. Outputs are written only when every pair is done (ok or failed); after
2, 3 or 130, rerun the same command to finish and write them.
"""


def register(sub: Any) -> None:
    p = sub.add_parser(
        "grade",
        help=COMMANDS["grade"],
        description="Grade the top --depth results of each run, reusing the store.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--queries", required=True, metavar="Q", help="queries (TSV or JSONL)")
    p.add_argument("--docs", required=True, metavar="D", help="documents (JSONL or TSV)")
    add_runs(p, "TREC run(s) whose top --depth results are graded", required=True)
    p.add_argument("--depth", type=int, default=10, metavar="K", help="top K per query (10)")
    p.add_argument(
        "--skip-judged",
        action="append",
        default=[],
        metavar="QRELS",
        help="leave out pairs these qrels already grade",
    )
    p.add_argument(
        "--skip-missing",
        action="store_true",
        help="skip pairs whose query or doc id is not in --queries/--docs (else an error)",
    )
    p.add_argument("--prompt", default=DEFAULT_PROMPT, help="prompt name or file (passage)")
    add_allow_changed_prompt(p)
    p.add_argument(
        "--model",
        action="extend",
        nargs="+",
        default=[],
        metavar="M",
        help="model; several (--model A --model B, or --model A B) make an ensemble",
    )
    add_llm_options(p)
    add_judge_options(p)
    add_store(p)
    p.add_argument("--out", metavar="JUDGMENTS.jsonl", help="write judgments JSONL")
    p.add_argument("--qrels-out", metavar="QRELS", help="write TREC qrels (ok grades only)")
    p.add_argument("--dry-run", action="store_true", help="estimate only; send nothing")
    p.add_argument(
        "--verbose",
        action="store_true",
        help="with --dry-run: after the estimate, list the pairs that would be sent "
        "(query id, doc id, judge; on stdout)",
    )
    p.add_argument(
        "--max-cost",
        type=float,
        metavar="USD",
        help="stop before this run spends more: each request's ceiling (its reply at the "
        "prompt's max_tokens) is reserved before it is sent, so a budget near --dry-run's "
        "expected cost stops early",
    )
    p.add_argument("--verify-low", action="store_true", help="regrade 0-1 grades a second time")
    p.add_argument("--verify-prompt", metavar="NAME", help="prompt of the verifier")
    p.add_argument("--verify-model", metavar="M", help="model of the verifier")
    grade_holes.add_flags(p)
    p.set_defaults(func=run)


def _check_args(args: argparse.Namespace) -> None:
    if args.concurrency < 1:
        raise InputError("--concurrency must be at least 1")
    if args.max_attempts < 1:
        raise InputError("--max-attempts must be at least 1")
    if args.max_cost is not None and args.max_cost < 0:
        raise InputError("--max-cost must not be negative")
    check_judge_args(args)
    if (args.verify_prompt or args.verify_model) and not args.verify_low:
        raise InputError("--verify-prompt/--verify-model need --verify-low")
    _check_folders(args)


def _check_folders(args: argparse.Namespace) -> None:
    """Fail before grading (and paying) when an output or the store could not be written."""
    paths = [("--out", args.out), ("--qrels-out", args.qrels_out)]
    paths.append(("--merged-out", args.merged_out))
    if not args.dry_run:  # a dry run never creates a store
        paths.append(("--store", args.store))
    for flag, value in paths:
        if value is None:
            continue
        path = Path(value)
        folder = path.parent if str(path.parent) else Path(".")
        if not folder.is_dir():
            raise InputError(
                f"{flag}: the folder does not exist", path=path, hint="create it first"
            )
        if path.is_dir():
            raise InputError(f"{flag}: is a folder, not a file", path=path)


class _Judges:
    """The judges of one run, built from the flags and the one `Settings`."""

    def __init__(self, args: argparse.Namespace, docs: dict[str, Any], writer: StoreWriter):
        self.args = args
        self.settings = Settings.from_args(args)
        self.secrets: list[str] = []
        self.writer = writer
        self.members: list[Judge] = []
        self.verifier: Judge | None = None
        # Every judge an LLM: a missing key only matters once a request is to be sent.
        llm = judge_kind(args.judge).takes_model
        self.missing_key = self.settings.defer_missing_key() if llm else None
        base = JudgeSettings(
            prompt=load_prompt(args.prompt),
            docs=docs,
            endpoint=self.settings,
            on_call=writer.log_call,
        )
        self.members = build_judges(args, base)
        self.secrets = self.settings.secrets if llm else []
        if args.judge == "lexical":
            from grader.judges.lexical.judge import LexicalJudge

            for judge in self.members:
                if isinstance(judge, LexicalJudge):
                    note = lexical_settings_note(judge.config.path, judge.judge_id)
                    print(note, file=sys.stderr)
        if args.verify_low:
            first_model = (args.model or [None])[0]
            model = self.settings.model(args.verify_model or first_model)
            prompt = args.verify_prompt or args.prompt
            verifier = self.llm(model, prompt)
            if any(verifier.fingerprint() == m.fingerprint() for m in self.members):
                raise InputError(
                    "--verify-low would ask the same judge twice",
                    hint="give --verify-prompt or --verify-model different from the first judge",
                )
            self.verifier = verifier

    def llm(self, model: str, prompt_name: str) -> Judge:
        """The verifier: the registry's `llm` judge, whatever --judge is."""
        settings = JudgeSettings(
            model=model,
            prompt=load_prompt(prompt_name),
            endpoint=self.settings,
            on_call=self.writer.log_call,
        )
        judge = build_judge("llm", settings)
        self.secrets = self.settings.secrets
        return judge

    def check_key(self) -> None:
        """Raise the missing key's error: called when some pair is not stored (nothing sent)."""
        if self.missing_key is not None:
            raise self.missing_key


def _prompts_of(judges: _Judges) -> list[PromptSpec]:
    """The prompt files of the LLM judges (members and verifier)."""
    from grader.judges.llm.judge import LLMJudge

    found = [*judges.members, *([judges.verifier] if judges.verifier else [])]
    return [j.prompt for j in found if isinstance(j, LLMJudge)]


def lexical_settings_note(path: str | None, judge_id: str) -> str:
    """Which settings file the lexical judge reads, and the judge id it stamps."""
    from grader.judges.lexical.judge import JUDGE_ID

    which = "the shipped default" if judge_id == JUDGE_ID else "not the shipped default"
    return f"lexical judge settings: {path} ({which}; judgments say judge {judge_id})"


def run(args: argparse.Namespace) -> int:
    from grader.cli.output_files import clean_outputs, saving_unsaved
    from grader.io.docs import read_docs
    from grader.io.queries import read_queries

    _check_args(args)
    if not args.dry_run:
        clean_outputs([args.out, args.qrels_out, args.merged_out])
    holes = grade_holes.plan(args)
    queries = read_queries(args.queries)
    # The lexical judge's collection statistics need every document; an LLM judge needs only
    # those of the selected pairs, so a large docs file is streamed and the rest not kept.
    lexical = judge_kind(args.judge).needs_all_docs
    docs = read_docs(args.docs) if lexical else {}
    selection = pairs_to_grade(
        args.run,
        queries,
        docs if lexical else (lambda ids: read_docs(args.docs, ids=ids)),
        depth=args.depth,
        skip_judged=[] if holes is not None else args.skip_judged,
        skip_missing=args.skip_missing,
        **grade_holes.selection_kwargs(holes),
    )
    if holes is not None:
        grade_holes.take_selection(holes, selection, args)
    if selection.missing and not args.quiet:
        print(f"skipped {selection.missing} pairs with unknown ids", file=sys.stderr)
    store_path = Path(args.store)
    # A dry run never creates a store; it reads one if it exists.
    store = (
        None
        if args.dry_run and not store_path.exists()
        else Store(store_path, on_busy=print_store_busy)
    )
    try:
        writer = StoreWriter(store)
        judges = _Judges(args, docs, writer)
        if store is not None:
            store.add_secrets(judges.secrets)
            check_prompts(store, _prompts_of(judges), allow_changed=args.allow_changed_prompt)
        progress = GradingProgress(enabled=False if args.quiet else None)
        with progress as bar, saving_unsaved(args.out, writer.unsaved):
            report = run_grading(
                selection.pairs,
                judges.members,
                store=store,
                writer=writer,
                verify_judge=judges.verifier,
                concurrency=args.concurrency,
                max_cost=args.max_cost,
                dry_run=args.dry_run,
                progress=bar,
                handle_sigint=True,
                freeze_gc=True,
                secrets=judges.secrets,
                stream_final=True,
                before_sending=judges.check_key,
            )
    finally:
        if store is not None:
            store.close()
    if args.dry_run:
        also = grade_holes.summary(holes, report, dry_run=True) if holes is not None else None
        print_dry_run(report, judges.verifier is not None, args.verbose, also)
        return 0
    print(summary_line(report), file=sys.stderr)
    if holes is not None:
        print(grade_holes.summary(holes, report), file=sys.stderr)
    if report.failed:
        from grader.cli.failed_pairs import failure_causes_text  # imports the LLM judge's errors

        print(failure_causes_text(report.judgments), file=sys.stderr)
    if report.interrupted:
        print(interrupted_text(report.done(), report.pairs), file=sys.stderr)
        return 130
    if report.held_elsewhere:
        print(
            f"{report.held_elsewhere} pairs are being graded by another process sharing the store"
            f" ({args.store}) that has not answered them in {grading_run.HOLD_WAIT_S / 60:.0f}"
            " minutes; "
            f"{report.done()} of {report.pairs} pairs done and stored; outputs not written. "
            f"Rerun the same command once that process is done (or gone): {resume_hint()}",
            file=sys.stderr,
        )
        return 1
    if report.budget_reached:
        raise BudgetError(
            f"stopped before exceeding --max-cost ${args.max_cost:g}: spent ${report.cost:.4f}, "
            f"{report.done()} of {report.pairs} pairs done and stored, "
            f"{report.pending} left; outputs not written. Rerun the same command with a higher "
            "--max-cost to finish (stored answers cost nothing)"
        )
    grade_holes.write_outputs(args, report, holes)
    if report.failed:
        from grader.cli.failed_pairs import failed_pairs_text

        print(failed_pairs_text(report.judgments), file=sys.stderr)
        return 1
    return 0
