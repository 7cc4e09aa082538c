"""Reading runs, and the one rule for naming them (`evaluate`, `calibrate` and `regrade` alike).

A run is named by its file stem (`bm25.txt.gz` -> `bm25`); repeated stems get their folder
(`a/run`), or in one folder the whole name (`r.txt`); the same file twice gets a prime (`r.txt'`);
`-` is `stdin`. Two runs never share a name, so no command has to refuse them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from grader.errors import InputError
from grader.metrics.rank_order import Precision

if TYPE_CHECKING:
    import pandas as pd

STDIN = "-"


def run_names(paths: Sequence[str]) -> list[str]:
    """Each run's name, in order: the file stem, disambiguated as the module docstring says."""
    stems = []
    for text in paths:
        name = "stdin" if text == STDIN else _without_compression(Path(text).name)
        stems.append(Path(name).stem or name)
    parents = [Path(t).parent.name for t in paths]
    names: list[str] = []
    for text, stem, parent in zip(paths, stems, parents, strict=True):
        if stems.count(stem) == 1:
            name = stem
        elif parent and parents.count(parent) == 1:
            name = f"{parent}/{stem}"
        else:
            name = Path(text).name
        while name in names:
            name += "'"
        names.append(name)
    return names


def _without_compression(name: str) -> str:
    """A file name without its compression suffix (`bm25.txt.zst` -> `bm25.txt`)."""
    from grader.io.streams import COMPRESSED

    suffix = Path(name).suffix
    return name.removesuffix(suffix) if suffix.lower() in COMPRESSED else name


@contextlib.contextmanager
def run_source(path: str, stdin: BinaryIO | None = None) -> Iterator[str | Path]:
    """The file to read run `path` from: for `-` with `stdin` given, a temporary copy of that stream
    (an InputError then names "stdin"); any other path as it is (`spool.open_binary` copies a pipe
    on its first open).
    """
    if path != STDIN or stdin is None:
        yield path
        return
    from grader.io.spool import spool

    copy = spool(stdin, "stdin")
    try:
        yield copy
    except InputError as exc:
        raise InputError(exc.reason, path="stdin", line=exc.line, hint=exc.hint) from None
    finally:
        copy.unlink(missing_ok=True)


def read_run_file(
    path: str, *, precision: Precision = "float32", stdin: BinaryIO | None = None
) -> pd.DataFrame:
    """A run file, or with `-` the run on `stdin` (default: the process's); errors then name
    "stdin". `attrs["path"]` is the path as given."""
    from grader.io.trec import read_run  # Arrow and pandas: only where a frame is read

    with run_source(path, stdin) as source:
        frame = read_run(source, precision=precision)
    if path == STDIN:
        frame.attrs["path"] = STDIN
    return frame


def read_runs(paths: Sequence[str], *, precision: Precision = "float32") -> dict[str, pd.DataFrame]:
    """Every run by its name (`run_names`), in the order given."""
    return {
        name: read_run_file(path, precision=precision)
        for name, path in zip(run_names(paths), paths, strict=True)
    }
