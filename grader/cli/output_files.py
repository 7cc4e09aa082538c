"""Before a command writes its outputs: remove what killed runs left beside them, and say so;
when a full disk stops a run, write the paid answers nothing else took where it can."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from grader.io.files import remove_stale_temp_files
from grader.io.output_set import OutputSet
from grader.models import Judgment
from grader.store.disk_full import StoreFullError


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
def saving_unsaved(
    out: str | Path | None, unsaved: Callable[[], Sequence[Judgment]]
) -> Iterator[None]:
    """When a full disk stops the run in this block: `save_unsaved` of `unsaved()` (the
    writer's answers no journal took) to `out`, then the error goes on."""
    try:
        yield
    except StoreFullError:
        save_unsaved(out, unsaved())
        raise


def save_unsaved(out: str | Path | None, judgments: Sequence[Judgment]) -> None:
    """Paid answers that neither the store nor any journal took (every disk tried is full):
    written to `out` as judgments JSONL when it can be, and said on stderr either way."""
    if not judgments:
        return
    if out:
        from grader.io.judgments import write_judgments

        try:
            write_judgments(out, judgments)
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
