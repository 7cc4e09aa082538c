"""`relgrade batch status|collect|close`: the Batch API jobs and the file exports recorded in a
store (and the parser of every `batch` action)."""

from __future__ import annotations

import argparse
import asyncio
import json
from dataclasses import asdict
from typing import Any

from grader import defaults
from grader.batch.api.client import TERMINAL_STATUSES
from grader.batch.api.state import BatchState, Job
from grader.batch.files.exports import ExportInfo, ExportState, FileState
from grader.batch.files.import_files import close_export
from grader.batch.files.import_followup import CloseSummary
from grader.cli import batch_files, batch_run
from grader.cli.batch_common import (
    JudgeFactory,
    add_batch_options,
    batch_command,
    make_runner,
    progress_printer,
    use_stored_base_url,
)
from grader.cli.flags import add_api_key_env, add_command, add_llm_options, add_store
from grader.cli.regrade_output import (
    add_output_options,
    check_one_version,
    job_versions,
    print_and_write,
    version_outcome,
)
from grader.cli.stderr import clean_outputs, open_store, say
from grader.errors import InputError
from grader.job.endpoint import Settings
from grader.store.store import Store
from grader.store.writer import StoreWriter


def register(sub: Any) -> None:
    p = add_command(
        sub,
        "batch",
        description="Check on, and finish, the Batch API jobs that regrade --batch recorded; "
        "export request files for any inference engine and import its results.",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    _add_status(actions)
    collect = add_command(
        actions,
        "collect",
        help="finish the open batch jobs of a store",
        description="Finish the open Batch API jobs of the store: upload and create what was "
        "not, wait for the server (--no-wait: one round of checks), validate every output line "
        "as live grading does, re-ask the rest live (or mark them failed with --no-live-retry) "
        "and store the judgments. Then print the diff and write --out/--qrels-out as the "
        "regrade command that submitted the jobs would.",
    )
    add_store(collect, "the store regrade --batch recorded its jobs in")
    collect.add_argument(
        "--no-wait", action="store_true", help="one round of checks; collect what is done"
    )
    add_llm_options(collect)
    add_batch_options(collect)
    add_output_options(collect)
    collect.set_defaults(func=run_collect)
    batch_files.register(actions)
    _add_close(actions)
    batch_run.register(actions)


def _add_status(actions: Any) -> None:
    status = add_command(
        actions,
        "status",
        help="list the batch jobs of a store",
        description="List the Batch API jobs recorded in the store: phase, server status, "
        "requests done of all, prompt and batch id. Open jobs are refreshed from the server "
        "first (--no-refresh: the stored state only).",
    )
    add_store(status, "the store regrade --batch recorded its jobs in")
    status.add_argument(
        "--base-url",
        metavar="URL",
        help="OpenAI-compatible endpoint (default: the one stored with the open jobs)",
    )
    add_api_key_env(status)
    status.add_argument(
        "--no-refresh", action="store_true", help="show the stored state; ask no server"
    )
    status.add_argument("--format", choices=["table", "json"], default="table")
    status.add_argument(
        "--exports",
        action="store_true",
        help="list only the batch file exports (batch export) and how many lines came back",
    )
    status.add_argument(
        "--files",
        action="store_true",
        help="list each request file of the exports: answered, partial or untouched, and what "
        "`batch close` would mark missing",
    )
    status.set_defaults(func=run_status)


def run_status(args: argparse.Namespace) -> int:
    with open_store(args.store) as store, BatchState(store) as state:
        with ExportState(store) as export_state:
            exports = export_state.exports()
        if args.files:
            print_files(store, exports, args.format)
            return 0
        if args.exports:
            if args.format == "json":
                print(json.dumps([export_json(e) for e in exports], indent=2))
            else:
                print(exports_table(exports))
            return 0
        note = None
        if not args.no_refresh:
            use_stored_base_url(args, state)  # the endpoint the jobs were sent to
            note = asyncio.run(_refresh(state, Settings.from_args(args)))
        jobs = state.jobs()
    if args.format == "json":
        print(json.dumps([judge_json(asdict(j)) for j in jobs], indent=2))
    else:
        print(render_jobs(jobs, args.store))
        if exports:
            print("\nbatch file exports (batch export / batch import):")
            print(exports_table(exports))
    if note:
        say(note)
    return 0


async def _refresh(state: BatchState, settings: Settings) -> str | None:
    stale = [
        j
        for j in state.jobs(open_only=True)
        if j.batch_id and j.remote_status not in TERMINAL_STATUSES
    ]
    if not stale:
        return None
    try:
        client = settings.batch_client(timeout=defaults.BATCH_TIMEOUT_S)  # status: no --timeout
    except InputError as exc:
        return f"not refreshed from the server: {exc}"
    try:
        for job in stale:
            assert job.batch_id is not None
            state.set_remote(job.job_id, await client.retrieve(job.batch_id))
    finally:
        await client.close()
    return None


def render_jobs(jobs: list[Job], store: str = "relgrade.db") -> str:
    if not jobs:
        return "no batch jobs in this store"
    header = f"{'job':>4}  {'phase':<10} {'status':<11} {'done':>13}  {'prompt':<16} batch"
    lines = [header]
    for j in jobs:
        done = f"{j.n_completed + j.n_failed}/{j.n_requests}"
        if j.n_failed:
            done += f" ({j.n_failed} err)"
        lines.append(
            f"{j.job_id:>4}  {j.phase:<10} {j.remote_status or '-':<11} {done:>13}  "
            f"{j.judge_config.get('prompt_id', '-'):<16} {j.batch_id or '-'}"
        )
    open_jobs = sum(1 for j in jobs if j.phase != "collected")
    if open_jobs:
        lines.append(f"{open_jobs} open; `{batch_command('collect', store)}` finishes them")
    return "\n".join(lines)


def run_collect(args: argparse.Namespace) -> int:
    with open_store(args.store) as store:
        with BatchState(store) as state:
            versions = job_versions(state.jobs(open_only=True))
        check_one_version(args, versions)
        clean_outputs([args.out, args.qrels_out])
        writer = StoreWriter(store)
        summary = asyncio.run(_collect(args, store, writer))
        writer.flush()
        with BatchState(store) as state:
            left = state.jobs(open_only=True)
            discount = Settings.from_args(args).prices.batch_discount
            outcomes = [version_outcome(store, state, v, discount) for v in versions]
    say(
        f"collected {summary.jobs} batch{'' if summary.jobs == 1 else 'es'} "
        f"({summary.pairs} pairs): {summary.batch} graded from the batch, "
        f"{summary.live} re-asked live, {summary.failed} failed"
    )
    if left:
        waited = " after waiting the longest a batch may take" if summary.waited_out else ""
        say(f"{len(left)} jobs still open (the server is not done{waited}); run this again later")
    code = print_and_write(args, outcomes) if outcomes else 0
    return 1 if summary.failed else code


async def _collect(args: argparse.Namespace, store: Store, writer: StoreWriter) -> Any:
    with BatchState(store) as probe:
        if not probe.jobs(open_only=True):
            from grader.batch.api.jobs import CollectSummary

            return CollectSummary()
        use_stored_base_url(args, probe)  # the endpoint the jobs were sent to
    factory = JudgeFactory(args, writer)
    store.add_secrets(factory.secrets)
    runner = make_runner(store, args, factory)
    try:
        return await runner.run(
            factory.for_job, wait=not args.no_wait, progress=progress_printer(args.quiet)
        )
    finally:
        await runner.client.close()
        runner.state.close()
        await factory.aclose()


CLOSE_EPILOG = """\
Once the engine that ran an export is dead and what it wrote is imported: each line with no
results line (which `batch export` leaves out while a run may still answer it) is stored failed
(Batch:missing, never a grade), so the same `batch export` command then writes exactly the pairs
with no ok answer. A result that still comes back is imported (the first ok answer is final).
While the first run is alive, do not close: import its results, or `batch export
--include-pending` (paid twice). See docs/regrade-and-batch.md.

EXPORT: an export id (or a prefix only it has), one of its request files, or its folder.
`relgrade batch status --files` shows each request file and what closing would mark missing.
"""


def _add_close(actions: Any) -> None:
    close = add_command(
        actions,
        "close",
        help="close an export whose engine died: its unanswered lines become missing",
        description="Close a batch file export whose engine died: every line with no results "
        "line becomes missing, so the next `batch export` writes exactly the unanswered pairs.",
        epilog=CLOSE_EPILOG,
    )
    add_store(close, "the store batch export recorded the export in")
    close.add_argument("export", nargs="+", metavar="EXPORT", help="the export(s) to close")
    close.set_defaults(func=run_close)


def run_close(args: argparse.Namespace) -> int:
    args.dry_run = True  # nothing is sent, no key needed
    with open_store(args.store, "batch export") as store:
        with ExportState(store) as files:
            chosen = list(dict.fromkeys(e for given in args.export for e in files.resolve(given)))
        writer = StoreWriter(store)
        factory = JudgeFactory(args, writer, offline=True)
        summaries = [close_export(store, factory.for_job, e) for e in chosen]
        writer.flush()
    for summary in summaries:
        say(close_text(summary, args.store))
    return 0


def close_text(summary: CloseSummary, store: str) -> str:
    """What closing one export did, and what follows."""
    text = (
        f"closed export {summary.export_id}: {summary.missing:,} requests without a results "
        f"line stored as missing"
    )
    if summary.already:
        text += f" ({summary.already:,} more were answered ok elsewhere meanwhile)"
    text += (
        f"; {summary.to_export:,} requests of it have no ok answer: the same `relgrade batch "
        f"export --store {store} ...` command now writes them"
    )
    return text


def files_table(states: list[FileState]) -> str:
    """Each request file of the exports: its state, lines by outcome, and what closing would
    mark missing."""
    if not states:
        return "no request files"
    rows = [f"{'export':<12}  {'file':>5}  {'state':<9}  {'lines':>7}  {'ok':>7}  "
            f"{'failed':>7}  {'waiting':>7}  path"]  # fmt: skip
    for f in states:
        rows.append(
            f"{f.export_id:<12}  {f.file_no:>5}  {f.state:<9}  {f.lines:>7,}  {f.ok:>7,}  "
            f"{f.failed:>7,}  {f.waiting:>7,}  {f.path or '(never published)'}"
        )
    by_export: dict[str, int] = {}
    for f in states:
        by_export[f.export_id] = by_export.get(f.export_id, 0) + f.waiting
    for export_id, waiting in by_export.items():
        if waiting:
            rows.append(
                f"export {export_id}: {waiting:,} requests wait for results; if its engine "
                f"died, `relgrade batch close` would mark them missing"
            )
    return "\n".join(rows)


def file_json(f: FileState) -> dict[str, Any]:
    data = asdict(f)
    data["file"] = data.pop("file_no")
    return {**data, "state": f.state, "close_would_mark_missing": f.waiting}


def print_files(store: Store, exports: list[ExportInfo], fmt: str) -> None:
    """`batch status --files`: every request file of every export."""
    with ExportState(store) as files:
        states = [s for e in exports for s in files.file_states(e.export_id)]
    if fmt == "json":
        print(json.dumps([file_json(s) for s in states], indent=2))
    else:
        print(files_table(states))


def exports_table(exports: list[ExportInfo]) -> str:
    """The exports of a store: lines, how many came back ok or failed, files and folder."""
    if not exports:
        return "no batch file exports in this store"
    header = f"{'export':<12}  {'back':>17}  {'failed':>7}  {'files':>5}  {'prompt':<16} folder"
    rows = [header]
    for e in exports:
        back = f"{e.returned:,}/{e.n_lines:,}"
        note = "" if e.complete else "  (export stopped before the end)"
        rows.append(
            f"{e.export_id:<12}  {back:>17}  {e.returned_failed:>7,}  {e.files:>5}  "
            f"{e.judge_config.get('prompt_id', '-'):<16} {e.out_dir}{note}"
        )
    return "\n".join(rows)


def judge_json(data: dict[str, Any]) -> dict[str, Any]:
    """A job's or an export's fields, its judge configuration as `model` and `prompt`."""
    config = data.pop("judge_config")
    data["model"], data["prompt"] = config.get("model"), config.get("prompt_id")
    return data


def export_json(e: ExportInfo) -> dict[str, Any]:
    data = judge_json(asdict(e))
    data["lines"], data["pairs"] = data.pop("n_lines"), data.pop("n_pairs")
    return {**data, "returned": e.returned}
