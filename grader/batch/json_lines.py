"""Results lines decoded fast (msgspec), to exactly what `json.loads` gives: a line msgspec
refuses is decoded again by `json.loads`, so what is accepted or refused, and with which error,
stays the standard library's. `loads_line` keeps only what an import reads (`ANSWER_KEYS`), as
structs."""

from __future__ import annotations

import json
import types
import typing
from typing import Any

import msgspec

from grader.judges.llm.completion_body import CompletionBody

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


# A key the import or the reply validator reads must be a field (a test checks).


def _keys_of(shape: Any) -> dict[str, Any] | None:
    """The fields of a struct type, each with its value's (None: a value taken whole)."""
    args = [a for a in typing.get_args(shape) if a is not type(None)]
    if typing.get_origin(shape) in (list, types.UnionType) and len(args) == 1:
        return _keys_of(args[0])
    if isinstance(shape, type) and issubclass(shape, msgspec.Struct):
        hints = typing.get_type_hints(shape)
        return {name: _keys_of(hints[name]) for name in shape.__struct_fields__}
    return None


ANSWER_KEYS: dict[str, Any] = _keys_of(ResultLine) or {}  # what `loads_line` keeps, nested

_LINE_DECODER = msgspec.json.Decoder(ResultLine)


def loads_line(raw: bytes) -> ResultLine | None:
    """`loads(raw)` with only `ANSWER_KEYS` kept, as structs, each value equal to `loads`'s;
    None when the line is not ASCII (msgspec does not check UTF-8 in skipped parts) or not of
    that shape: then decode it whole."""
    if not raw.isascii():
        return None
    try:
        return _LINE_DECODER.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
