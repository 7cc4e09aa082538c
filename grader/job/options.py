"""Every option of the grade job, with its type and default, in one place: the command maps its
flags onto `GradeOptions` and the Python API its keywords (`options_from`), by the same names. And,
for every command, outputs never clobber inputs (`refuse_clashes`: through links and `..`)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader import defaults
from grader.errors import InputError


@dataclass
class GradeOptions:
    """grade's options (named as its flags, `--no-logprobs` as `logprobs`)."""

    run: list[Any] = field(default_factory=list)
    queries: Any = None
    docs: Any = None
    dataset: str | None = None
    depth: int = defaults.DEPTH
    skip_judged: list[Any] = field(default_factory=list)
    skip_missing: bool = False
    prompt: str = defaults.PROMPT
    allow_changed_prompt: bool = False
    model: list[str] = field(default_factory=list)
    judge: str = defaults.JUDGE
    judge_config: str | None = None
    base_url: str | list[str] | None = None
    api_key_env: str | None = None
    output_mode: str = defaults.OUTPUT_MODE
    max_context: int | None = None
    logprobs: bool = True
    concurrency: int = defaults.CONCURRENCY
    rpm: float | None = None
    tpm: float | None = None
    timeout: float = defaults.TIMEOUT_S
    max_attempts: int = defaults.MAX_ATTEMPTS
    prices: str | None = None
    quiet: bool = False
    store: str = defaults.STORE
    out: str | None = None
    qrels_out: str | None = None
    dry_run: bool = False
    verbose: bool = False
    max_cost: float | None = None
    verify_low: bool = False
    verify_prompt: str | None = None
    verify_model: str | None = None
    merged_out: str | None = None
    llm_scale: str | None = None
    also_judged: int | None = None
    seed: int = 0
    stratify: bool = False


OPTION_NAMES = frozenset(f.name for f in dataclasses.fields(GradeOptions))


def options_from(given: Mapping[str, Any]) -> GradeOptions:
    """The options named in `given` (the command's flags or the API's keywords), the others at
    their defaults; a name that is no option is a TypeError naming it."""
    unknown = sorted(set(given) - OPTION_NAMES)
    if unknown:
        raise TypeError(f"grade has no option {unknown[0]!r}")
    return GradeOptions(**given)


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
