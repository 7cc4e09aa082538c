"""The one writer of `--out` (judgments JSONL) and `--qrels-out` (their ok grades), for `grade`
and `regrade`: each file atomic, the set of them an `OutputSet`; and the paid answers a full disk
left unstored, written to --out and read back by the next run."""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path

from grader.errors import InputError
from grader.io.files import OutputSet, atomic_write, iter_lines, remove_stale_temp_files
from grader.store.busy import StoreFullError
from grader.store.journal import Rows
from grader.store.reading import Block
from grader.store.store import Store
from grader.store.writer import StoreWriter

Merged = tuple[str, Callable[[list[str]], Iterable[str]]]
"""--merged-out: its path and its lines made from the qrels lines."""


def clean_outputs(paths: Sequence[str | Path | None]) -> list[str]:
    """Remove stale temp files of `paths`; the lines saying what a killed run left half
    written (which were rewritten and which were not)."""
    targets = [Path(p) for p in paths if p]
    said = [
        f"removed {stale}: a temp file left by a run killed while writing {target}"
        for target in targets
        for stale in remove_stale_temp_files(target)
    ]
    previous = OutputSet(targets).previous() if targets else None
    if previous is not None:
        said.append(f"warning: {previous.describe()}; this run rewrites them when it finishes")
    return said


def write_judgments_and_qrels(
    blocks: Iterable[Block],
    out: str | None,
    qrels_out: str | None,
    *,
    first: Mapping[Path, Callable[[], object]] | None = None,
    lines: Callable[[str], str] | None = None,
    merged: Merged | None = None,
) -> None:
    """Write `out` (each block's lines, through `lines`) and `qrels_out` in one pass over `blocks`
    (a failed judgment is unjudged in the qrels, never 0). `first`: files written before them
    (path: writer), so the outputs never stand without them; `merged`: from the qrels, last."""
    first = first or {}
    extra = [merged[0]] if merged else []
    outputs = OutputSet([*(p for p in (out, qrels_out) if p), *extra, *first])
    outputs.begin()  # a kill between the files is told to the next run
    for path, write in first.items():
        write()
        outputs.done(path)
    qrels: list[str] = []
    if out:
        with atomic_write(out) as fh:
            for block in blocks:
                fh.write(block.lines if lines is None else lines(block.lines))
                qrels.append(block.qrels)
        outputs.done(out)
    elif qrels_out or merged:
        qrels = [block.qrels for block in blocks]
    if qrels_out:
        with atomic_write(qrels_out) as fh:
            fh.writelines(qrels)
        outputs.done(qrels_out)
    if merged:
        with atomic_write(merged[0]) as fh:
            fh.writelines(merged[1](qrels))
    outputs.finish()


@contextlib.contextmanager
def saving_unsaved(
    out: str | Path | None, writer: StoreWriter, say: Callable[[str], None]
) -> Iterator[None]:
    """When a full disk stops the run in this block, the paid answers no journal took go to
    `out` as judgments JSONL, each with the store's id and row (`journal_row`), so that the next
    run on that store reads them back (`read_back_unsaved`) instead of paying again."""
    try:
        yield
    except StoreFullError:
        _save_unsaved(out, writer, say)
        raise


def _save_unsaved(out: str | Path | None, writer: StoreWriter, say: Callable[[str], None]) -> None:
    judgments = writer.unsaved()
    if not judgments:
        return
    store_id = writer.store.store_id if writer.store is not None else ""
    if out:
        try:
            with atomic_write(out) as fh:
                for judgment, row in itertools.zip_longest(judgments, writer.unsaved_rows()):
                    line = json.loads(judgment.model_dump_json())
                    if row is not None and store_id:
                        line.update(store_id=store_id, journal_row=list(row))
                    fh.write(json.dumps(line) + "\n")
        except OSError as exc:
            say(f"cannot write {out} either ({exc.strerror})")
        else:
            say(
                f"{len(judgments):,} paid answers that could not be stored are in {out} "
                "(judgments JSONL; only those, not the run's outputs)"
            )
            return
    say(
        f"{len(judgments):,} paid answers could not be written anywhere: a rerun asks for "
        "them again"
    )


def read_back_unsaved(store: Store, out: str | Path | None) -> int:
    """Store the paid answers a full disk left in `out` (`save_unsaved`) for this store (same
    id); how many. A file of the run's outputs (no `journal_row` on its first line) is not
    read further."""
    if not out or not Path(out).is_file():
        return 0
    rows = Rows()
    try:
        for number, text in iter_lines(out):
            line = json.loads(text) if text.strip() else {}
            if not isinstance(line, dict) or "journal_row" not in line:
                if number == 1:
                    return 0
                continue
            if line.get("store_id") == store.store_id:
                rows.judgments.append(tuple(line["journal_row"]))
    except (ValueError, InputError):
        return 0  # not the file save_unsaved wrote: the run rewrites it
    if rows.judgments:
        store.write_rows(rows)
    return len(rows.judgments)
