"""Batch API input files: one line per request keyed by content key, split under both limits."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grader.batch.requests import request_line, split_requests
from grader.errors import InputError


def _body(n: int) -> dict[str, object]:
    return {"model": "m", "messages": [{"role": "user", "content": "x" * n}]}


def test_line_is_a_batch_api_request_keyed_by_content_key() -> None:
    line = request_line("sha256:abc", _body(3))
    assert line.endswith(b"\n")
    record = json.loads(line)
    assert record == {
        "custom_id": "sha256:abc",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": _body(3),
    }


def test_split_by_request_count() -> None:
    files = list(split_requests(((f"k{i}", _body(1)) for i in range(7)), max_requests=3))
    assert [keys for keys, _ in files] == [["k0", "k1", "k2"], ["k3", "k4", "k5"], ["k6"]]
    first = [json.loads(x)["custom_id"] for x in files[0][1].splitlines()]
    assert first == ["k0", "k1", "k2"]


def test_split_by_bytes_never_exceeds_the_limit() -> None:
    one = len(request_line("k0", _body(100)))
    files = list(split_requests(((f"k{i}", _body(100)) for i in range(5)), max_bytes=2 * one + 1))
    assert [len(keys) for keys, _ in files] == [2, 2, 1]
    assert all(len(content) <= 2 * one + 1 for _, content in files)


def test_request_too_big_for_any_file_is_an_error() -> None:
    with pytest.raises(InputError, match="over the 50-byte file limit"):
        list(split_requests([("k", _body(100))], max_bytes=50))


def test_repeated_key_is_an_error() -> None:
    with pytest.raises(InputError, match="appears twice"):
        list(split_requests([("k", _body(1)), ("k", _body(2))]))


@given(
    sizes=st.lists(st.integers(0, 300), max_size=40),
    max_requests=st.integers(1, 10),
    extra=st.integers(0, 2000),
)
def test_split_keeps_every_request_once_in_order_within_limits(
    sizes: list[int], max_requests: int, extra: int
) -> None:
    max_bytes = len(request_line("k00", _body(300))) + extra
    reqs = [(f"k{i:02d}", _body(n)) for i, n in enumerate(sizes)]
    files = list(split_requests(reqs, max_requests=max_requests, max_bytes=max_bytes))
    assert [k for keys, _ in files for k in keys] == [k for k, _ in reqs]
    for keys, content in files:
        assert 1 <= len(keys) <= max_requests
        assert len(content) <= max_bytes
