"""The one writer of `--out` (judgments JSONL) and `--qrels-out` (their ok grades), for `grade`
and `regrade` alike: each file atomic, the set of them told to the next run when a kill
falls between two (`grader.io.output_set`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from grader.io.files import atomic_write, remove_stale_temp_files
from grader.io.output_set import OutputSet
from grader.store.lookup import Block

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
    """Write `out` (each block's lines, through `lines` if given) and `qrels_out` in one pass
    over `blocks`: a failed judgment has no grade, so it is unjudged in the qrels, never 0.
    `first`: files written before them (each path with its writer), so that the outputs never
    stand without them; `merged`: a file made from the qrels lines, written last."""
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
