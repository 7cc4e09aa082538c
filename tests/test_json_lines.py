"""`grader.batch.json_lines.loads` gives what `json.loads` gives, value and error alike;
`loads_line` gives the same values of the keys an import reads, as structs, or None (decode it
whole)."""

from __future__ import annotations

import contextlib
import json
import math
import types
import typing
from typing import Any, cast

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.batch.adapter import ResultLine, loads, loads_line
from grader.batch.collect import answered_body, other_model
from grader.judges.llm.replies import InvalidReply, parse_completion
from grader.prompts import load_prompt
from tests.helpers.hypothesis_scale import examples
from tests.helpers.result_lines import agrees, results_line, same_value, values

EDGE_CASES = [
    b'{"a": 1, "a": 2}',  # the last duplicate wins
    b'{"a": 123456789012345678901234567890}',  # an integer past 64 bits stays an integer
    b'{"a": -0, "b": -0.0, "c": 1E5, "d": 2.2250738585072011e-308}',
    b'{"a": NaN, "b": Infinity, "c": -Infinity}',  # json.loads takes these
    b'{"a": 1e400}',  # out of float range: inf for json.loads
    b'{"a": "\\ud800"}',  # a lone surrogate
    b'\xef\xbb\xbf{"a": 1}',  # a byte-order mark
    '{"a": "é"}'.encode("utf-16"),
    b' {"a": "\\u0000\\n"} \r',
    b"[]",
    b'"text"',
]

BAD = [b'{"a": 1', b'{"a": 1}x', b"[1,]", b'{"a": "\xff"}', b"", b"nul"]


@pytest.mark.parametrize("raw", EDGE_CASES)
def test_edge_cases_decode_as_json_loads(raw: bytes) -> None:
    assert same_value(loads(raw), json.loads(raw))


@pytest.mark.parametrize("raw", BAD)
def test_refused_as_json_loads_refuses(raw: bytes) -> None:
    with pytest.raises(ValueError) as ours:
        loads(raw)
    with pytest.raises(ValueError) as theirs:
        json.loads(raw)
    assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)


@settings(max_examples=examples(300), deadline=None)
@given(values, st.booleans())
def test_any_value_decodes_as_json_loads(value: Any, ascii_only: bool) -> None:
    raw = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    assert same_value(loads(raw), json.loads(raw))


def test_msgspec_decodes_plain_lines_and_json_loads_only_what_it_refuses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[bytes] = []
    real = json.loads

    def counted(raw: bytes) -> Any:
        calls.append(raw)
        return real(raw)

    monkeypatch.setattr(json, "loads", counted)  # the module json_lines falls back on
    assert loads(b'{"custom_id": "x", "n": [1, 2.5, null]}') == {
        "custom_id": "x",
        "n": [1, 2.5, None],
    }
    assert calls == []  # msgspec decoded it
    assert math.isnan(loads(b'{"a": NaN}')["a"])
    assert calls == [b'{"a": NaN}']  # msgspec refuses NaN: the standard library's answer


def _raw(record: Any) -> bytes:
    return json.dumps(record).encode()


def test_a_reply_line_keeps_the_keys_an_import_reads() -> None:
    record = results_line()
    got = loads_line(_raw(record))
    assert got is not None and agrees(got, record)
    assert got.response is not None and got.response.body is not None
    assert got.response.body.choices is not None
    logprobs = got.response.body.choices[0].logprobs
    assert logprobs is not None and logprobs.content is not None
    alternatives = logprobs.content[1].top_logprobs
    assert alternatives is not None and (alternatives[1].token, alternatives[1].logprob) == (
        "3",
        -1.9,
    )


LINE_VARIANTS = [
    {"logprobs": None},  # asked without logprobs
    {"logprobs": {"content": None}},
    {"logprobs": {"content": [{"token": "2", "logprob": -0.1, "top_logprobs": None}]}},
    {"message": None},  # not an object: the line is decoded whole
    {"message": "text"},
    {"logprobs": "x"},
    {"logprobs": {"content": ["not a token"]}},
    {"finish_reason": None, "message": {"content": "Grade: 2"}},
    {"message": {"content": None, "refusal": "I can't"}},
]


@pytest.mark.parametrize("changes", LINE_VARIANTS)
def test_other_shapes_keep_the_same_values_or_are_decoded_whole(changes: dict[str, Any]) -> None:
    record = results_line(**changes)
    got = loads_line(_raw(record))
    assert got is None or agrees(got, record)
    if changes in LINE_VARIANTS[:3]:
        assert got is not None  # a reply's shapes: read the fast way


@pytest.mark.parametrize(
    "raw",
    [
        b'{"id": "\xff", "custom_id": "x"}',  # not ASCII: UTF-8 would go unchecked in skipped parts
        '{"id": "é", "custom_id": "x"}'.encode(),
        b'{"id": NaN, "custom_id": "x"}',  # what msgspec refuses
        b'{"id": "\\ud800", "custom_id": "x"}',
        b'{"custom_id": "x", "response": []}',
        b'{"custom_id": "x", "response": {"body": {"choices": {}}}}',
        b"[]",
        b'{"custom_id": "x"',
        b'{"id": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    ],
)
def test_lines_it_does_not_read_are_left_to_loads(raw: bytes) -> None:
    assert loads_line(raw) is None


@pytest.mark.parametrize("head", [b"", b"[NaN, "])  # (NaN: json.loads decodes it, and fails)
def test_a_value_nested_too_deeply_is_a_value_error(head: bytes) -> None:
    with pytest.raises(ValueError, match="nested too deeply"):
        loads(head + b"[" * 100_000 + b"]" * 100_000 + (b"]" if head else b""))


@settings(max_examples=examples(300), deadline=None)
@given(
    st.dictionaries(st.sampled_from(["message", "logprobs", "finish_reason", "x"]), values),
    st.dictionaries(st.text(max_size=5), values, max_size=3),
)
def test_any_line_read_so_equals_loads_with_the_keys_kept(
    changes: dict[str, Any], extra: dict[str, Any]
) -> None:
    record = results_line(**changes)
    record["response"]["body"].update(extra)
    raw = json.dumps(record).encode()  # ASCII, as engines write it
    got = loads_line(raw)
    assert got is None or agrees(got, loads(raw))


class _Reading(dict):  # type: ignore[type-arg]
    """A dict that notes the path of every key read from it (and from what it holds)."""

    def __init__(self, value: dict[str, Any], path: tuple[str, ...], read: set[tuple[str, ...]]):
        super().__init__({k: _reading(v, (*path, k), read) for k, v in value.items()})
        self.path, self.read = path, read

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add((*self.path, key))
        return super().get(key, default)

    def __getitem__(self, key: str) -> Any:
        self.read.add((*self.path, key))
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.read.add((*self.path, str(key)))
        return super().__contains__(key)


def _reading(value: Any, path: tuple[str, ...], read: set[tuple[str, ...]]) -> Any:
    if isinstance(value, dict):
        return _Reading(value, path, read)
    if isinstance(value, list):
        return [_reading(v, path, read) for v in value]
    return value


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


def _kept_path(path: tuple[str, ...]) -> bool:
    """Whether `loads_line` keeps the value at `path` (it, or a value holding it, is kept)."""
    keys: dict[str, Any] | None = ANSWER_KEYS
    for key in path:
        if keys is None:
            return True  # kept whole
        if key not in keys:
            return False
        keys = keys[key]
    return True


@pytest.mark.parametrize("mode", ["json", "text"])
@pytest.mark.parametrize("changes", [{}, *LINE_VARIANTS])
def test_the_import_and_the_validator_read_no_key_left_out(
    mode: Any, changes: dict[str, Any]
) -> None:
    """Every key the import's checks and the reply validator read of a line is one
    `loads_line` keeps (a key read but left out would read as missing)."""
    read: set[tuple[str, ...]] = set()
    record = _reading(results_line(**changes), (), read)
    other_model(record, "m")
    other_model(record, "another")
    body = answered_body(record)
    assert body is not None
    with contextlib.suppress(InvalidReply):
        parse_completion(cast(dict[str, Any], body), mode=mode, spec=load_prompt("passage-v1"))
    assert read and [path for path in read if not _kept_path(path)] == []
    assert ("response", "body", "choices", "finish_reason") in read


@pytest.mark.parametrize(
    "usage",
    [None, {}, {"prompt_tokens_details": None}, {"prompt_tokens_details": 5}, {"total": 7}, "x"],
)
def test_other_usages_keep_the_same_values_or_are_decoded_whole(usage: Any) -> None:
    record = results_line()
    record["response"]["body"]["usage"] = usage
    got = loads_line(_raw(record))
    assert got is None or agrees(got, record)
    if usage in (None, {}, {"prompt_tokens_details": None}, {"total": 7}):
        assert got is not None
