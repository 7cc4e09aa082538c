"""`relgrade batch export|import`: request files for any inference engine and its results."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
from typing import Any

from grader.batch.adapter import LLMBatchJudge, job_config
from grader.batch.files.export_files import check_batch_mode, export_requests
from grader.batch.files.exports import ExportState
from grader.batch.files.import_files import Importer
from grader.batch.files.import_followup import ImportSummary
from grader.cli.batch_common import JudgeFactory, Printer, add_batch_limits
from grader.cli.flags import (
    add_api_key_env,
    add_command,
    add_judge_options,
    add_llm_options,
    add_pair_inputs,
    add_select,
    add_server_flags,
    add_store,
)
from grader.cli.stderr import open_store, say
from grader.errors import InputError
from grader.job.endpoint import Settings
from grader.job.judges import build_judges, check_judge_args
from grader.job.options import refuse_clashes
from grader.judges.llm.judge import LLMJudge
from grader.judges.registry import JudgeSettings
from grader.prompts import load_prompt
from grader.store.store import Store
from grader.store.writer import StoreWriter

EXPORT_EPILOG = """\
Pairs: the top --depth of --run files (as grade picks them), or --select over the pairs in the
store (as regrade). Pairs already ok in the store are not exported (after a partial import the
same command exports only what is missing), nor pairs waiting in an earlier export not imported
yet (--include-pending: they are; `relgrade batch close` an export whose engine died).

Each line is {"custom_id", "method", "url", "body"}: the body is exactly what live grading
sends; custom_id is relgrade:EXPORT_ID:KEY. Each file's lines, size and sha256 are kept in the
store, so any process can `relgrade batch import` the results. Nothing is sent anywhere.
"""

IMPORT_EPILOG = """\
RESULTS: files in the shape vLLM run-batch and the Batch API write ({"id", "custom_id",
"response": {"status_code", "request_id", "body"}, "error"}), or folders of *.jsonl files.
Each line is validated exactly as a live reply; error lines, refused replies and requests of a
touched request file that no line answers are stored failed with the reason (never a grade);
--reask asks them live. Importing twice changes nothing; a killed import loses nothing. Results
of another store's export are refused. Then grade/regrade write --out and --qrels-out.

Exit status: 0 every line imported ok; 1 some requests failed or are missing (export again to
get only those, or --reask); 2 bad input.
"""


def register(actions: Any) -> None:
    """Add `export` and `import` to `relgrade batch`."""
    _add_export(actions)
    im = add_command(
        actions,
        "import",
        help="import an engine's results files, validated as live replies",
        description="Import the results of `relgrade batch export` request files into the store, "
        "every line validated exactly as a live reply.",
        epilog=IMPORT_EPILOG,
    )
    add_store(im)
    im.add_argument("results", nargs="+", metavar="RESULTS", help="results files or folders")
    im.add_argument(
        "--reask", action="store_true", help="ask failed and missing requests live afterwards"
    )
    im.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="processes that validate lines (default: one per core, at most 4, for results over "
        "32 MB; 0: none, this process does it all)",
    )
    add_llm_options(im)
    im.set_defaults(func=run_import)


def _add_export(actions: Any) -> None:
    ex = add_command(
        actions,
        "export",
        help="write request files in the OpenAI batch format for any inference engine",
        description="Write the requests of the selected pairs as OpenAI batch files (for vLLM "
        "run-batch, Ray Data or any engine that reads them), recorded in the store.",
        epilog=EXPORT_EPILOG,
    )
    add_store(ex)
    add_pair_inputs(ex, "exported")
    add_select(ex, "stored pairs instead of --run: ")
    ex.add_argument("--prompt", default="passage", help="prompt name or file (passage)")
    ex.add_argument("--model", metavar="M", help="model ($RELGRADE_MODEL, else gpt-4o-mini)")
    add_judge_options(ex, batch=True)
    ex.add_argument("--out-dir", required=True, metavar="DIR", help="folder for request files")
    add_batch_limits(ex, "request file")
    ex.add_argument(
        "--include-pending",
        action="store_true",
        help="also export pairs whose request waits in an earlier export not imported yet "
        "(an engine run on both is paid twice for them)",
    )
    ex.add_argument("--base-url", metavar="URL", help="recorded only: nothing is sent")
    add_api_key_env(ex)
    add_server_flags(ex)
    ex.add_argument("--quiet", action="store_true", help="no progress output")
    ex.set_defaults(func=run_export)


PAUSE_ENV = "RELGRADE_TEST_IMPORT_PAUSE"  # tests: seconds to wait after each stored chunk


def _export_pairs(args: argparse.Namespace, store: Store, fingerprint: dict[str, Any]) -> Any:
    """(pairs as (query, doc), how many) from --run or --select."""
    if args.select:
        from grader.regrade.selection import parse_selection, select_candidates

        chosen = select_candidates(store, parse_selection(args.select), fingerprint)
        return [(c.query, c.doc) for c in chosen], len(chosen)
    from grader.grading.pairs import pairs_to_grade
    from grader.io.docs import read_docs, read_queries

    selection = pairs_to_grade(
        args.run,
        read_queries(args.queries),
        lambda ids: read_docs(args.docs, ids=ids),
        depth=args.depth,
        skip_judged=args.skip_judged,
        skip_missing=args.skip_missing,
    )
    if selection.missing and not args.quiet:
        say(f"skipped {selection.missing} pairs with unknown ids")
    return ((pair.query, pair.doc) for pair in selection.pairs), len(selection.pairs)


def run_export(args: argparse.Namespace) -> int:
    _check_export_args(args)
    settings = dataclasses.replace(Settings.from_args(args), sending=False)  # sends nothing
    spec = load_prompt(args.prompt)
    live = build_judges(args, JudgeSettings(prompt=spec, endpoint=settings))[0]
    if not isinstance(live, LLMJudge):  # judges registered with batch=True build LLM judges
        raise InputError(f"judge {args.judge!r} made no LLM judge: nothing to export")
    try:
        judge = LLMBatchJudge(live)
        check_batch_mode(judge.mode)  # a mode batch engines would drop is refused
        config = job_config(judge, args.prompt)
        with open_store(args.store, "batch export", create=not args.select) as store:
            pairs, total = _export_pairs(args, store, judge.fingerprint())
            summary = export_requests(
                store,
                judge,
                config,
                pairs,
                args.out_dir,
                max_requests=args.batch_max_requests,
                max_bytes=args.batch_max_bytes,
                total=total,
                progress=Printer("export", args.quiet),
                freeze_gc=True,
                include_pending=args.include_pending,
            )
            with ExportState(store) as state:
                waiting = state.waiting_elsewhere(summary.export_id)
    finally:
        asyncio.run(live.aclose())
    say(
        f"exported {summary.lines:,} requests ({summary.pairs:,} pairs) in "
        f"{len(summary.files)} files to {args.out_dir} (export {summary.export_id}); "
        f"{summary.stored:,} pairs already graded in the store were left out"
    )
    if summary.stale:
        say(
            f"removed {summary.stale} request files a killed export left unlisted (none of"
            " their requests was recorded: they are in this export)"
        )
    if summary.pending:
        say(left_out_text(summary.pending, list(summary.waiting_in), args.store))
    for other, count in waiting.items():
        say(pending_warning(count, other, args.store))
    for path in summary.files:
        print(path)
    return 0


def _check_export_args(args: argparse.Namespace) -> None:
    refuse_clashes(
        [
            ("--run", args.run),
            ("--queries", args.queries),
            ("--docs", args.docs),
            ("--skip-judged", args.skip_judged),
        ],
        [("--out-dir", args.out_dir), ("--store", args.store)],
    )
    if bool(args.run) == bool(args.select):
        raise InputError(
            "give either --run (with --queries and --docs) or --select",
            hint="--run RUN --queries Q --docs D, or --select all",
        )
    if args.run and not (args.queries and args.docs):
        raise InputError("--run needs --queries and --docs")
    check_judge_args(args)


def import_text(summary: ImportSummary) -> str:
    """The summary of an import, for stderr."""
    kinds = ", ".join(f"{k} {n:,}" for k, n in sorted(summary.problems.items()))
    head = (
        f"imported {summary.lines:,} lines of {summary.files} files: {summary.ok:,} ok, "
        f"{summary.failed:,} failed{f' ({kinds})' if kinds else ''}, "
        f"{summary.missing:,} missing (no results line) stored by this import; "
        f"{summary.already:,} already stored"
    )
    if summary.still_missing is not None:
        head += (
            f"; {summary.still_missing:,} requests of these request files still without an ok"
            " answer in the store"
        )
    head += f"; {summary.paid_twice:,} answers paid twice (their request was answered already)"
    lines = [head]
    for path in summary.empty:
        lines.append(
            f"{path}: no results lines (empty): nothing of it was imported; run the engine on"
            " its request file again, then import the new results"
        )
    for where in summary.truncated:
        lines.append(f"{where}: last line cut short (the engine stopped while writing)")
    if summary.n_malformed:
        shown = ", ".join(summary.malformed)
        lines.append(f"{summary.n_malformed:,} lines are not JSON ({shown})")
    if summary.reasked_ok or summary.reasked_failed or summary.permanent:
        lines.append(
            f"asked live: {summary.reasked_ok:,} ok, {summary.reasked_failed:,} failed again; "
            f"{summary.permanent:,} not asked (refused for good: past the context, an unknown "
            "model, ...)"
        )
    return "\n".join(lines)


def run_import(args: argparse.Namespace) -> int:
    refuse_clashes([("RESULTS", args.results)], [("--store", args.store)])
    if args.concurrency < 1:
        raise InputError("--concurrency must be at least 1")
    if args.workers is not None and args.workers < 0:
        raise InputError("--workers must be 0 or more")
    args.dry_run = not args.reask  # Settings: without --reask nothing is sent, no key needed
    with open_store(args.store, "batch export") as store:
        writer = StoreWriter(store)
        factory = JudgeFactory(args, writer)
        store.add_secrets(factory.secrets)
        closed = False
        try:
            with Importer(
                store,
                factory.for_job,
                progress=Printer("import", args.quiet, pause=float(os.environ.get(PAUSE_ENV) or 0)),
                workers=args.workers,
                secrets=factory.secrets,
                freeze_gc=True,
            ) as importer:
                summary = importer.run(args.results)
                if args.reask:
                    closed = True  # the clients close in the loop that used them
                    asyncio.run(_reask(importer, summary, args.concurrency, factory))
                left = importer.unresolved(summary)
        finally:
            writer.flush()
            if not closed:
                asyncio.run(factory.aclose())
    say(import_text(summary))
    if left:
        say(
            f"{left:,} requests have no grade (stored as failed with the reason): run "
            "`relgrade batch export` again with the same selection (it exports only those), "
            "or import again with --reask"
        )
        return 1
    return 0


async def _reask(
    importer: Importer, summary: ImportSummary, concurrency: int, factory: JudgeFactory
) -> None:
    try:
        await importer.reask_failed(summary, concurrency=concurrency)
    finally:
        await factory.aclose()


def left_out_text(pending: int, exports: list[str], store: str) -> str:
    """Why `batch export` left pairs out, and the way on in either case."""
    named = ", ".join(exports)
    return (
        f"{pending:,} pairs left out: their requests wait in export {named}, whose results are"
        " not imported yet (an engine run on both would be paid twice). If that engine is still"
        " running, import its results when it is done; if it died, import what it wrote, then"
        f" `relgrade batch close --store {store} {exports[0]}` marks the rest missing and this"
        " command exports them. --include-pending exports them now anyway"
    )


def pending_warning(count: int, other: str, store: str) -> str:
    """The warning of `batch export --include-pending` about requests also in `other`."""
    return (
        f"warning: {count:,} of these requests are also in export {other}, whose results are "
        "not imported yet: --include-pending is for a first run still alive, and both runs "
        f"are paid for them. If {other}'s engine died instead, `relgrade batch close --store "
        f"{store} {other}` (after importing what it wrote) and export again: nothing is paid "
        "twice"
    )
