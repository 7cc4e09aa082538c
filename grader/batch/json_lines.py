"""Results lines decoded fast (msgspec), to exactly what `json.loads` gives: a line msgspec
refuses is decoded again by `json.loads`, so what is accepted or refused, and with which error,
stays the standard library's. `loads_line` keeps only what an import reads (`ResultLine`), as
structs."""

from __future__ import annotations

import json
from typing import Any

import msgspec

from grader.judges.llm.grade_token import CompletionBody

_DECODER = msgspec.json.Decoder()


def loads(raw: bytes) -> Any:
    """The JSON value of `raw`, as `json.loads(raw)` gives it (too deeply nested: ValueError)."""
    try:
        try:
            return _DECODER.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return json.loads(raw)
    except RecursionError:
        raise ValueError("the JSON value is nested too deeply to decode") from None


class Response(msgspec.Struct, gc=False):
    status_code: Any = None
    body: CompletionBody | None = None


class ResultLine(msgspec.Struct, gc=False):
    """The keys an import reads of a results line (a default: what `dict.get` gives)."""

    custom_id: Any = None
    response: Response | None = None
    error: Any = None


# A key the import or the reply validator reads must be a field (tests/test_json_lines.py).
_LINE_DECODER = msgspec.json.Decoder(ResultLine)


def loads_line(raw: bytes) -> ResultLine | None:
    """`loads(raw)` with only the keys of `ResultLine` kept, as structs, each value equal to
    `loads`'s; None when the line is not ASCII (msgspec does not check UTF-8 in skipped parts)
    or not of that shape: then decode it whole."""
    if not raw.isascii():
        return None
    try:
        return _LINE_DECODER.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
