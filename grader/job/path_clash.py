"""Outputs never clobber inputs: before a command reads or sends anything, an output path that
is one of its input paths, or two outputs on one path, is an `InputError` (exit 2) naming both
flags. "The same path" is the same file: through symbolic links, `..` and hard links."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from grader.errors import InputError

PathValue = str | Path | None | Sequence[str | Path | None]
"""A flag's value: one path, none, or several (`--run A B`)."""

Named = Sequence[tuple[str, PathValue]]
"""(flag, value) pairs, e.g. [("--out", "j.jsonl"), ("--run", ["a", "b"])]."""


def refuse_clashes(inputs: Named, outputs: Named) -> None:
    """Raise `InputError` when an output is an input or two outputs are one file. `-` (stdin or
    stdout) and empty values are left out, but only one input may be `-` (`one_stdin`)."""
    one_stdin(inputs)
    ins = list(_paths(inputs))
    outs = list(_paths(outputs))
    for i, (flag, path) in enumerate(outs):
        for in_flag, in_path in ins:
            if same_file(path, in_path):
                raise InputError(
                    f"{flag} {path} is the input {in_flag} {in_path}: writing it would replace "
                    "what this command reads",
                    hint=f"give {flag} another path",
                )
        for other_flag, other in outs[:i]:
            if same_file(path, other):
                raise InputError(
                    f"{other_flag} {other} and {flag} {path} are the same file: one output "
                    "would replace the other",
                    hint="give each output its own path",
                )


def one_stdin(inputs: Named) -> None:
    """Raise `InputError` when more than one input is `-`: stdin holds one file."""
    flags = [flag for flag, value in inputs for one in _values(value) if str(one) == "-"]
    if len(flags) > 1:
        raise InputError(
            f"stdin (-) is given twice ({flags[0]} and {flags[1]}): it holds one file",
            hint="save all but one of them to a file first",
        )


def same_file(a: str | Path, b: str | Path) -> bool:
    """Whether `a` and `b` name one file: `os.path.samefile` when both exist (hard links,
    symbolic links), else the same fully resolved path (an output not written yet)."""
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):
        pass
    return os.path.realpath(a) == os.path.realpath(b)


def _values(value: PathValue) -> list[str | Path | None]:
    return [value] if value is None or isinstance(value, str | Path) else list(value)


def _paths(named: Named) -> Iterator[tuple[str, str]]:
    for flag, value in named:
        for one in _values(value):
            text = "" if one is None else str(one)
            if text and text != "-":
                yield flag, text
