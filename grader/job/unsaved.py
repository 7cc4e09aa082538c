"""When a full disk stops a run: the paid answers nothing else took, written to --out where it
can be and read back into the store by the next run."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from grader.errors import InputError
from grader.models import Judgment
from grader.store.disk_full import StoreFullError
from grader.store.store import Store
from grader.store.writer import StoreWriter


@contextlib.contextmanager
def saving_unsaved(
    out: str | Path | None, writer: StoreWriter, say: Callable[[str], None]
) -> Iterator[None]:
    """When a full disk stops the run in this block: `save_unsaved` of the writer's answers
    no journal took to `out`, then the error goes on."""
    try:
        yield
    except StoreFullError:
        store_id = writer.store.store_id if writer.store is not None else ""
        save_unsaved(out, writer.unsaved(), writer.unsaved_rows(), store_id, say)
        raise


def save_unsaved(
    out: str | Path | None,
    judgments: Sequence[Judgment],
    rows: Sequence[tuple[Any, ...]],
    store_id: str,
    say: Callable[[str], None],
) -> None:
    """Paid answers that no store or journal took (every disk full), to `out` as judgments
    JSONL with the store's id and each store row (`journal_row`), so that the next run on that
    store reads them back (`read_back_unsaved`) instead of paying again."""
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
