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
    """The JSON value of `raw`, as `json.loads(raw)` gives it (raises as it raises; a value
    nested too deeply to decode is a ValueError, not the RecursionError both decoders raise)."""
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
    """A results line (the keys an import reads; a field's default is what `dict.get` gives
    when the key is absent)."""

    custom_id: Any = None
    response: Response | None = None
    error: Any = None


# What the import (`grader.batch.collect`: custom_id, error, response's status and body's model)
# and the reply validator (`grader.judges.llm.replies.parse_completion`) read of a results line.
# A key either of them reads must be a field: a test walks the validator with dicts that record
# the keys read.


def _keys_of(shape: Any) -> dict[str, Any] | None:
    """The fields of a struct type, each with its value's fields (a list's or an optional
    value's: those of its items; None: a value taken whole)."""
    args = [a for a in typing.get_args(shape) if a is not type(None)]
    if typing.get_origin(shape) in (list, types.UnionType) and len(args) == 1:
        return _keys_of(args[0])
    if isinstance(shape, type) and issubclass(shape, msgspec.Struct):
        hints = typing.get_type_hints(shape)
        return {name: _keys_of(hints[name]) for name in shape.__struct_fields__}
    return None


ANSWER_KEYS: dict[str, Any] = _keys_of(ResultLine) or {}
"""The keys `loads_line` keeps, nested as in a line (a list's items under the list's key;
None: the value whole)."""

_LINE_DECODER = msgspec.json.Decoder(ResultLine)


def loads_line(raw: bytes) -> ResultLine | None:
    """`loads(raw)` with only `ANSWER_KEYS` kept, at every level, as structs: every value kept
    equals `loads`'s (a key absent reads as `dict.get` gives it); None when the line is not
    ASCII or not of that shape (a reply's objects where the keys are, lists where lists are):
    then decode it whole. A line read so is one `loads` accepts (JSON syntax is checked in the
    parts skipped too; UTF-8 is not, hence ASCII only: what engines write, as they escape
    other characters)."""
    if not raw.isascii():
        return None
    try:
        return _LINE_DECODER.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
