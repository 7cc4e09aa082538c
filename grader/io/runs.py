"""The one rule for naming runs (`evaluate`, `calibrate` and `regrade` alike).

A run is named by its file stem (`bm25.txt.gz` -> `bm25`); repeated stems get their folder
(`a/run`), or in one folder the whole name (`r.txt`); the same file twice gets a prime (`r.txt'`);
`-` is `stdin`. Two runs never share a name, so no command has to refuse them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from grader.io.spool import STDIN
from grader.io.streams import compression_of


def run_names(paths: Sequence[str]) -> list[str]:
    """Each run's name, in order: the file stem, disambiguated as the module docstring says."""
    stems = []
    for text in paths:
        name = "stdin" if text == STDIN else Path(text).name
        if compression_of(name):  # `bm25.txt.zst` is `bm25.txt`
            name = name.removesuffix(Path(name).suffix)
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
