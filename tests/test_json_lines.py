"""`grader.batch.json_lines.loads` gives what `json.loads` gives, value and error alike."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.batch.json_lines import loads

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


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN, and of the same types throughout."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


@pytest.mark.parametrize("raw", EDGE_CASES)
def test_edge_cases_decode_as_json_loads(raw: bytes) -> None:
    assert _same(loads(raw), json.loads(raw))


@pytest.mark.parametrize("raw", BAD)
def test_refused_as_json_loads_refuses(raw: bytes) -> None:
    with pytest.raises(ValueError) as ours:
        loads(raw)
    with pytest.raises(ValueError) as theirs:
        json.loads(raw)
    assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)


values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(values, st.booleans())
def test_any_value_decodes_as_json_loads(value: Any, ascii_only: bool) -> None:
    raw = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    assert _same(loads(raw), json.loads(raw))


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
