"""A results file cut into ranges of whole lines (what `batch import` hands its workers), and runs
of consecutive lines with one outcome (set by one statement each)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any


def line_ranges(path: Path, block: int) -> Iterator[tuple[int, int, int, bool]]:
    """(start, end, first line number, ends the file) of ranges of whole lines of about
    `block` bytes (a line longer than that is a range of its own)."""
    size = path.stat().st_size
    start, line = 0, 1
    with path.open("rb") as fh:
        while start < size:
            fh.seek(start)
            data = fh.read(block)
            end = start + len(data)
            whole = len(data)  # bytes of `data` that are whole lines
            while end < size and not data.endswith(b"\n"):
                cut = data.rfind(b"\n")
                if cut >= 0:
                    whole = cut + 1  # counted in place: a slice would copy ~4 MB
                    end = start + whole
                    break
                more = fh.read(block)  # no newline yet: one long line
                data += more
                end += len(more)
                whole = len(data)
            yield start, end, line, end >= size
            line += count_newlines(data, whole)
            start = end


def count_newlines(data: bytes, end: int) -> int:
    """`data.count(b"\n", 0, end)`, found by `find` (memchr): `count` of one byte goes
    through the bytes one at a time."""
    count, find = 0, data.find
    at = find(b"\n", 0, end)
    while at >= 0:
        count += 1
        at = find(b"\n", at + 1, end)
    return count


def runs_of(places: Iterable[tuple[int, int, str]]) -> Iterator[tuple[int, int, int, str]]:
    """(file, first line, last line, outcome) of each run of consecutive lines of one file
    with one outcome, for `places` (file, line, outcome) in file order."""
    run: list[Any] | None = None
    for file_no, line_no, outcome in places:
        if run is not None and run[0] == file_no and run[2] + 1 == line_no and run[3] == outcome:
            run[2] = line_no
            continue
        if run is not None:
            yield run[0], run[1], run[2], run[3]
        run = [file_no, line_no, line_no, outcome]
    if run is not None:
        yield run[0], run[1], run[2], run[3]
