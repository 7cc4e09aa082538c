"""Results lines decoded fast, to exactly what `json.loads` gives.

A results line (~1.8 KB with logprobs) took the standard library 30-50 us to decode, most of an
import's time per line; msgspec's decoder takes a third of that. Where msgspec decodes a line, the
value equals `json.loads`'s (duplicate keys: the last wins in both; integers of any size stay
integers; floats are correctly rounded in both); every line msgspec refuses (NaN and Infinity,
numbers out of float range, lone surrogates, a byte-order mark, other encodings than UTF-8, or
anything malformed) is decoded again by `json.loads`, so what is accepted and what is refused, and
with which error, stays the standard library's.

`loads_answer` decodes only what an import reads of a line that holds a reply (`ANSWER_KEYS`),
in half the time again (5.7 against 10.3 us a line): msgspec skips the rest (ids, token bytes)
without making objects of it.
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any, TypedDict, cast

import msgspec

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


# What the import (`grader.batch.collect`: custom_id, error, response's status and body's model)
# and the reply validator (`grader.judges.llm.replies.parse_completion`) read of a results line.
# A key either of them reads must be here: a test walks the validator with dicts that record
# the keys read.


class _TopLogprob(TypedDict, total=False):
    token: Any
    logprob: Any


class _TokenLogprob(TypedDict, total=False):
    token: Any
    logprob: Any
    top_logprobs: list[_TopLogprob] | None


class _Logprobs(TypedDict, total=False):
    content: list[_TokenLogprob] | None


class _Message(TypedDict, total=False):
    content: Any
    refusal: Any


class _Choice(TypedDict, total=False):
    message: _Message
    finish_reason: Any
    logprobs: _Logprobs | None


class _TokenDetails(TypedDict, total=False):
    cached_tokens: Any


class _Usage(TypedDict, total=False):
    prompt_tokens: Any
    completion_tokens: Any
    prompt_tokens_details: _TokenDetails | None


class _Body(TypedDict, total=False):
    model: Any
    usage: _Usage | None
    choices: list[_Choice]


class _Response(TypedDict, total=False):
    status_code: Any
    body: _Body


class _Answer(TypedDict, total=False):
    custom_id: Any
    response: _Response
    error: Any


def _keys_of(shape: Any) -> dict[str, Any] | None:
    """The keys of a TypedDict, each with its value's keys (a list's or an optional value's:
    those of its items; None: a value taken whole)."""
    args = [a for a in typing.get_args(shape) if a is not type(None)]
    if typing.get_origin(shape) in (list, types.UnionType) and len(args) == 1:
        return _keys_of(args[0])
    if typing.is_typeddict(shape):
        return {k: _keys_of(v) for k, v in typing.get_type_hints(shape).items()}
    return None


ANSWER_KEYS: dict[str, Any] = _keys_of(_Answer) or {}
"""The keys `loads_answer` keeps, nested as in a line (a list's items under the list's key;
None: the value whole)."""

_ANSWER_DECODER = msgspec.json.Decoder(_Answer)


def loads_answer(raw: bytes) -> dict[str, Any] | None:
    """`loads(raw)` with only `ANSWER_KEYS` kept, at every level; None when the line is not
    ASCII or not of that shape (a reply's objects where the keys are, lists where lists are):
    then decode it whole. Every value kept equals `loads`'s, and a line read so is one `loads`
    accepts (JSON syntax is checked in the parts skipped too; UTF-8 is not, hence ASCII only:
    what engines write, as they escape other characters)."""
    if not raw.isascii():
        return None
    try:
        answer = _ANSWER_DECODER.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None
    return cast(dict[str, Any], answer)  # (a TypedDict decodes to a plain dict)
