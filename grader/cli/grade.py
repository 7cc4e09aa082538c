"""`relgrade grade`: grade the top results of runs with an LLM (or the offline lexical judge).

Pairs come from the runs (`grader.grading.pairs`), answers from the store when it has them, the rest
from the judge (`grader.grading.pipeline`); outputs are written atomically once every pair is done.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from grader import defaults
from grader.cli.flags import (
    add_allow_changed_prompt,
    add_command,
    add_judge_options,
    add_llm_options,
    add_pair_inputs,
    add_store,
)
from grader.cli.stderr import print_store_busy, resume_hint, say
from grader.display.progress import GradingProgress
from grader.errors import BudgetError
from grader.grading.pipeline import GradingReport, run_report
from grader.job.grade import GradeJob, GradeResult, Outcome, Tell
from grader.job.options import options_from
from grader.job.summary import summary_line

EPILOG = """\
Models and endpoints: --model defaults to $RELGRADE_MODEL, else gpt-4o-mini; the endpoint is
--base-url, else $OPENAI_BASE_URL, else OpenAI. The key is never a flag and is written nowhere
(which key goes where: --api-key-env). A server other than api.openai.com needs no key (vLLM,
Ollama, llama.cpp server, here or on another host): without one it gets a placeholder. Several
--base-url (the same model on each): requests go to the server with the fewest in flight, a dead
one is dropped and its pairs go to the others; the summary counts each server's answers.

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
    p = add_command(
        sub,
        "grade",
        description="Grade the top --depth results of each run, reusing the store.",
        epilog=EPILOG,
    )
    add_pair_inputs(p, "graded", dataset=True)
    p.add_argument(
        "--prompt", default=defaults.PROMPT, help=f"prompt name or file ({defaults.PROMPT})"
    )
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
    p.add_argument(
        "--no-logprobs",
        dest="logprobs",
        action="store_false",
        help="ask for no logprobs, whatever the prompt file says: the judgments then carry no "
        "grade distribution (what `sample --strategy uncertainty` and `active` draw by), and "
        "each judgment is cheaper (2.4x faster on llama-cpp-python's server; docs/servers.md)",
    )
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
    p.add_argument(
        "--verify-low", action="store_true", help="grade pairs graded 0 or 1 a second time"
    )
    p.add_argument("--verify-prompt", metavar="NAME", help="prompt of the verifier")
    p.add_argument("--verify-model", metavar="M", help="model of the verifier")
    _add_people_flags(p)
    p.set_defaults(func=run)


def _add_people_flags(p: argparse.ArgumentParser) -> None:
    """The flags of grading on top of people's labels (`grader.job.people`)."""
    p.add_argument(
        "--merged-out",
        metavar="MERGED.qrels",
        help="with one --skip-judged: write people's grades (as written, any integer) and the "
        "LLM's on the holes, as TREC qrels; failed judgments stay holes",
    )
    p.add_argument(
        "--llm-scale",
        metavar="MAP",
        help="how --merged-out writes LLM grades, e.g. 0:0,1:1,2:4,3:7 for a 0..7 human scale "
        "(default identity 0:0,1:1,2:2,3:3)",
    )
    p.add_argument(
        "--also-judged",
        type=int,
        metavar="N",
        help="also grade N pairs people judged (drawn at random, seeded by --seed) so that "
        "calibrate measures agreement on this collection; the draw's manifest is written "
        "beside --out / --qrels-out",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of --also-judged's draw (0)")
    p.add_argument(
        "--stratify",
        action="store_true",
        help="--also-judged draws the same expected count from each human grade",
    )


def run(args: argparse.Namespace) -> int:
    given = {k: v for k, v in vars(args).items() if k not in ("command", "func")}  # the parser's
    tell = Tell(say=say, notice=say, busy=print_store_busy)
    from calibration.spotcheck import also_judged

    job = GradeJob(options_from(given), also_judged, tell)
    results: list[GradeResult] = []

    async def grading() -> GradingReport:
        results.append(await job.run(handle_sigint=True, freeze_gc=True))
        return results[0].report

    with GradingProgress(enabled=False if args.quiet else None) as tell.progress:
        report = run_report(grading)
    result = results[0]
    if args.dry_run:
        say(result.estimate_text())
        if args.verbose:
            sys.stdout.writelines(f"{q}\t{d}\t{judge}\n" for q, d, judge in report.to_send)
        return 0
    for line in (summary_line(report), result.holes_text(), result.causes_text()):
        if line:
            say(line)
    text = result.outcome_text(resume_hint())
    if result.outcome is Outcome.BUDGET:
        raise BudgetError(text)
    if text:
        say(text)
    return result.outcome.exit_code
