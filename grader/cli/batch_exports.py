"""What `batch status` shows of file exports (`--exports`, `--files`); `relgrade batch close`."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from grader.batch.files.exports import ExportInfo, FileState
from grader.batch.files.exports import ExportState as ExportFiles
from grader.batch.files.import_files import close_export
from grader.batch.files.import_followup import CloseSummary
from grader.cli.batch_common import JudgeFactory, open_store
from grader.cli.flags import add_store
from grader.cli.stderr import say
from grader.store.store import Store
from grader.store.writer import StoreWriter

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


def register(actions: Any) -> None:
    """Add `close` to `relgrade batch`."""
    close = actions.add_parser(
        "close",
        help="close an export whose engine died: its unanswered lines become missing",
        description="Close a batch file export whose engine died: every line with no results "
        "line becomes missing, so the next `batch export` writes exactly the unanswered pairs.",
        epilog=CLOSE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_store(close, "the store batch export recorded the export in")
    close.add_argument("export", nargs="+", metavar="EXPORT", help="the export(s) to close")
    close.set_defaults(func=run_close)


def run_close(args: argparse.Namespace) -> int:
    args.dry_run = True  # nothing is sent, no key needed
    with open_store(args.store, "batch export") as store:
        with ExportFiles(store) as files:
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
    with ExportFiles(store) as files:
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
