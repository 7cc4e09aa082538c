"""Lines of the JSONL and TSV readers (queries, docs, judgments, grades), errors naming file and
line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from grader.errors import InputError
from grader.io.files import iter_lines


def content_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number, line) of every line that is not blank; numbering counts blank lines too."""
    for lineno, line in iter_lines(path):
        if line.strip():
            yield lineno, line


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


def empty_file_error(path: str | Path, what: str, example: str) -> InputError:
    """The error for a file with no records."""
    return InputError(f"no {what} in the file (it is empty)", path=path, hint=f"expected {example}")
