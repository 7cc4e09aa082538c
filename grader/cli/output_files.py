"""Before a command writes its outputs: remove what killed runs left beside them, and say so;
when a full disk stops a run, write the paid answers nothing else took where it can."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from grader.errors import InputError
from grader.io.files import remove_stale_temp_files
from grader.io.output_set import OutputSet
from grader.models import Judgment
from grader.store.disk_full import StoreFullError
from grader.store.store import Store
from grader.store.writer import StoreWriter


def clean_outputs(paths: Sequence[str | Path | None]) -> None:
    """Remove stale temp files of `paths` and warn (stderr) when a killed run left them half
    written: which were rewritten and which were not."""
    targets = [Path(p) for p in paths if p]
    for target in targets:
        for stale in remove_stale_temp_files(target):
            print(
                f"removed {stale}: a temp file left by a run killed while writing {target}",
                file=sys.stderr,
            )
    previous = OutputSet(targets).previous() if targets else None
    if previous is not None:
        print(
            f"warning: {previous.describe()}; this run rewrites them when it finishes",
            file=sys.stderr,
        )


@contextlib.contextmanager
def saving_unsaved(out: str | Path | None, writer: StoreWriter) -> Iterator[None]:
    """When a full disk stops the run in this block: `save_unsaved` of the writer's answers
    no journal took to `out`, then the error goes on."""
    try:
        yield
    except StoreFullError:
        store_id = writer.store.store_id if writer.store is not None else ""
        save_unsaved(out, writer.unsaved(), writer.unsaved_rows(), store_id)
        raise


def save_unsaved(
    out: str | Path | None,
    judgments: Sequence[Judgment],
    rows: Sequence[tuple[Any, ...]] = (),
    store_id: str = "",
) -> None:
    """Paid answers that neither the store nor any journal took (every disk tried is full):
    written to `out` as judgments JSONL when it can be, each line with the store's id, its
    content key and its store row (`journal_row`), so the next run on that store reads them
    back (`read_back_unsaved`) instead of paying again; said on stderr either way."""
    if not judgments:
        return
    if out:
        import json

        from grader.io.files import atomic_write

        try:
            with atomic_write(out) as fh:
                given: list[tuple[Any, ...] | None] = list(rows) or [None] * len(judgments)
                for judgment, row in zip(judgments, given, strict=True):
                    line = json.loads(judgment.model_dump_json())
                    if row is not None and store_id:
                        line.update(store_id=store_id, journal_row=list(row))
                    fh.write(json.dumps(line) + "\n")
        except OSError as exc:
            print(f"cannot write {out} either ({exc.strerror})", file=sys.stderr)
        else:
            print(
                f"{len(judgments):,} paid answers that could not be stored are in {out} "
                "(judgments JSONL; only those, not the run's outputs)",
                file=sys.stderr,
            )
            return
    print(
        f"{len(judgments):,} paid answers could not be written anywhere: a rerun asks for "
        "them again",
        file=sys.stderr,
    )


def read_back_unsaved(store: Store, out: str | Path | None) -> int:
    """Store the paid answers a full disk left in `out` (`save_unsaved`) for this store (same
    id); how many. A file of the run's outputs (no `journal_row` on its first line) is not
    read further."""
    if not out or not Path(out).is_file():
        return 0
    import json

    from grader.io.files import iter_lines
    from grader.store.journal import Rows

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
