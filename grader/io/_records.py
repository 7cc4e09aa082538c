"""Helpers of the line-oriented readers (queries, docs, judgments, grades): every error names the
file, the line and what is wrong; the same id twice names both lines.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from grader.errors import InputError
from grader.io.files import iter_lines

LineFormat = Literal["jsonl", "tsv"]


def content_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number, line) of every line that is not blank; numbering counts blank lines too."""
    for lineno, line in iter_lines(path):
        if line.strip():
            yield lineno, line


def sniff_format(path: str | Path) -> LineFormat | None:
    """`jsonl` when the first non-blank line starts with `{`, `tsv` otherwise; None when empty."""
    for _, line in content_lines(path):
        return "jsonl" if line.lstrip().startswith("{") else "tsv"
    return None


def parse_json_object(path: str | Path, lineno: int, line: str) -> dict[str, Any]:
    """One JSONL line as a dict, or an InputError saying why it is not a JSON object."""
    try:
        value = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"not valid JSON ({exc.msg} at column {exc.colno})",
            path=path,
            line=lineno,
            hint="each line must be one JSON object",
        ) from None
    if not isinstance(value, dict):
        raise InputError(
            f"expected a JSON object, found {type(value).__name__}", path=path, line=lineno
        )
    return value


def pick_field(
    record: dict[str, Any],
    names: tuple[str, ...],
    *,
    path: str | Path,
    lineno: int,
    what: str,
    required: bool = True,
) -> tuple[str | None, Any]:
    """The first of `names` present in `record`: (field name, value); names the choices if none."""
    for name in names:
        if name in record:
            return name, record[name]
    if required:
        choices = ", ".join(f'"{n}"' for n in names)
        raise InputError(f"no {what} field (expected one of {choices})", path=path, line=lineno)
    return None, None


def as_id(value: Any, *, path: str | Path, lineno: int, what: str) -> str:
    """An id as text: strings as they are, integers converted; anything else is an error."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise InputError(
            f"{what} must be a string or an integer, found {json.dumps(value)[:40]}",
            path=path,
            line=lineno,
        )
    text = str(value)
    if not text.strip():
        raise InputError(f"{what} is empty", path=path, line=lineno)
    return text


def as_text(value: Any, *, path: str | Path, lineno: int, what: str) -> str:
    """A text field: must be a string."""
    if not isinstance(value, str):
        raise InputError(
            f"{what} must be a string, found {type(value).__name__}", path=path, line=lineno
        )
    return value


def check_duplicate(
    seen: dict[str, int], key: str, *, path: str | Path, lineno: int, what: str
) -> None:
    """Record `key` at `lineno`; the same key twice is an error naming both lines."""
    first = seen.get(key)
    if first is not None:
        raise InputError(
            f"{what} {key!r} appears twice, on lines {first} and {lineno}",
            path=path,
            line=lineno,
            hint="keep one of them",
        )
    seen[key] = lineno


def empty_file_error(path: str | Path, what: str, example: str) -> InputError:
    """The error for a file with no records."""
    return InputError(f"no {what} in the file (it is empty)", path=path, hint=f"expected {example}")
