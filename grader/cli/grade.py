"""`relgrade grade`: grade the top results of runs with an LLM (or the offline lexical judge).

Pairs come from the runs (`grader.grading.pairs`), answers from the store when it has them, the rest
from the judge (`grader.grading.pipeline`); outputs are written atomically once every pair is done.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from grader.cli import grade_holes
from grader.cli.commands import COMMANDS
from grader.cli.flags import add_runs, add_store
from grader.cli.grade_job import check_args, grade_selection, say_on_stderr, select_pairs
from grader.cli.grade_summary import print_dry_run, summary_line
from grader.cli.interrupts import interrupted_text, resume_hint
from grader.cli.judge_options import add_judge_options
from grader.cli.progress import GradingProgress
from grader.cli.prompt_check import add_allow_changed_prompt
from grader.cli.server_flags import add_logprobs_flag
from grader.cli.settings import add_llm_options
from grader.errors import BudgetError
from grader.grading import run as grading_run
from grader.grading.pipeline import GradingReport, run_report

DEFAULT_PROMPT = "passage"

EPILOG = """\
Models and endpoints: --model defaults to $RELGRADE_MODEL, else gpt-4o-mini. The endpoint is
--base-url, else $OPENAI_BASE_URL, else OpenAI. The key is never a flag and is written nowhere:
$OPENAI_API_KEY goes to OpenAI and to any other server not on this machine; a loopback server
(localhost, 127.0.0.0/8, ::1) gets no key unless --api-key-env NAME asks for the key in $NAME
(sent to any server). A server other than api.openai.com needs no key (vLLM, Ollama, llama.cpp
server, here or on another host): without one it gets a placeholder. Several --base-url (the
same model on each): the requests go to the server with the fewest in flight, a dead one is
dropped and its pairs go to the others, and the summary counts each server's answers.

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
    p.add_argument("--queries", metavar="Q", help="queries (TSV or JSONL)")
    p.add_argument("--docs", metavar="D", help="documents (JSONL or TSV)")
    p.add_argument(
        "--dataset",
        metavar="ID",
        help="an ir_datasets id: its queries and documents, where --queries/--docs are not "
        "given (needs relgrade[ir-datasets])",
    )
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
    add_llm_options(p, several_servers=True)
    add_logprobs_flag(p)
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


def run(args: argparse.Namespace) -> int:
    from grader.cli.output_files import clean_outputs

    check_args(args)
    if not args.dry_run:
        clean_outputs(
            [args.out, args.qrels_out, args.merged_out, *grade_holes.manifest_paths(args)]
        )
    selection, docs, holes = select_pairs(args, say_on_stderr)
    verify = False

    async def grading() -> GradingReport:
        nonlocal verify
        report, verify = await grade_selection(
            args,
            selection.pairs,
            docs,
            progress=bar,
            say=say_on_stderr,
            handle_sigint=True,
            freeze_gc=True,
        )
        return report

    with GradingProgress(enabled=False if args.quiet else None) as bar:
        report = run_report(grading)
    if args.dry_run:
        also = grade_holes.summary(holes, report, dry_run=True) if holes is not None else None
        print_dry_run(report, verify, args.verbose, also)
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
