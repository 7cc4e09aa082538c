"""Results lines and JSON values drawn for the results-line decoders, and how to compare them."""

from __future__ import annotations

import math
from typing import Any

import msgspec
from hypothesis import strategies as st


def same_value(a: Any, b: Any) -> bool:
    """Equal, NaN equal to NaN, and of the same types throughout."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same_value(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def token_entry(text: str, logprob: float, alternatives: list[tuple[str, float]]) -> dict[str, Any]:
    return {
        "token": text,
        "logprob": logprob,
        "bytes": list(text.encode()),
        "top_logprobs": [
            {"token": t, "logprob": p, "bytes": list(t.encode())} for t, p in alternatives
        ],
    }


def results_line(content: Any = '{"reason": "on topic", "grade": 2}', **changes: Any) -> Any:
    """A results line as vLLM's run-batch writes it (ids, logprobs with bytes, usage details);
    `changes` replace the choice's keys (None: left out)."""
    choice: dict[str, Any] = {
        "index": 0,
        "message": {"role": "assistant", "content": content, "refusal": None, "annotations": []},
        "logprobs": {
            "content": [
                token_entry('{"reason": "on topic", "grade": ', -0.05, []),
                token_entry("2", -0.2, [("2", -0.2), ("3", -1.9), ("1", -2.5), ('"', -4.0)]),
                token_entry("}", -0.01, []),
            ],
            "refusal": None,
        },
        "finish_reason": "stop",
    }
    for key, value in changes.items():
        if value is None:
            choice.pop(key, None)
        else:
            choice[key] = value
    return {
        "id": "vllm-1",
        "custom_id": "relgrade:abc:sha256:" + "0" * 64,
        "response": {
            "status_code": 200,
            "request_id": "vllm-batch-1",
            "body": {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1796129916,
                "model": "m",
                "choices": [choice],
                "usage": {
                    "prompt_tokens": 507,
                    "completion_tokens": 13,
                    "prompt_tokens_details": {"cached_tokens": 5},
                },
            },
        },
        "error": None,
    }


def agrees(ours: Any, theirs: Any) -> bool:
    """Whether a value read as structs equals the value `loads` gives (a struct's field: the
    dict's value at its key; absent, the field's default, what `dict.get` gives)."""
    if isinstance(ours, msgspec.Struct):
        blank = type(ours)()  # (every field has a default)
        return isinstance(theirs, dict) and all(
            agrees(getattr(ours, f), theirs.get(f, getattr(blank, f)))
            for f in ours.__struct_fields__
        )
    if isinstance(ours, list):
        return (
            isinstance(theirs, list)
            and len(ours) == len(theirs)
            and all(agrees(a, b) for a, b in zip(ours, theirs, strict=True))
        )
    return same_value(ours, theirs)
