"""A results line read as structs (`loads_line`: a batch import's fast path) holds what the line
read as a dict holds, and gives the reply the dict path gives (`other_model`, `answered_body`,
`valid_reply`: what live grading accepts), or None: then the import reads the line as a dict."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.batch.adapter import BatchReplies, LLMBatchJudge, loads, loads_line
from grader.batch.collect import answered_body, other_model
from grader.judges.llm.grade_token import grade_distribution
from grader.judges.llm.judge import LLMJudge
from grader.judges.llm.replies import GradeReply
from grader.prompts import OutputMode
from tests.helpers.hypothesis_scale import examples
from tests.helpers.result_lines import agrees, results_line, values


def _replies(mode: OutputMode) -> BatchReplies:
    live = LLMJudge(model="m", prompt="passage", base_url="http://127.0.0.1:9/v1")
    return LLMBatchJudge(live, mode=mode).replies


REPLIES = {mode: _replies(mode) for mode in ("json_schema", "text")}


def _dict_reply(raw: bytes, replies: BatchReplies) -> GradeReply | None:
    """The reply the import's dict path gives a line (None: not a reply live grading takes)."""
    record = loads(raw)
    if other_model(record, replies.fingerprint.get("model")) is not None:
        return None
    body = answered_body(record)
    return replies.valid_reply(body) if body is not None else None


def test_the_last_of_a_repeated_key_counts_as_in_loads() -> None:
    raw = b'{"custom_id": "a", "custom_id": "b", "response": {"status_code": 500}}'
    line = loads_line(raw)
    assert line is not None and line.custom_id == "b" and agrees(line, loads(raw))


@pytest.mark.parametrize("mode", ["json_schema", "text"])
def test_a_plain_reply_takes_the_fast_path_and_gives_the_dicts_reply(mode: OutputMode) -> None:
    content = '{"reason": "on topic", "grade": 2}' if mode != "text" else "on topic\nGrade: 2"
    raw = json.dumps(results_line(content)).encode()
    line = loads_line(raw)
    assert line is not None
    fast = REPLIES[mode].line_reply(line)
    assert fast is not None and fast == _dict_reply(raw, REPLIES[mode])
    if mode != "text":
        assert fast.distribution is not None and fast.grade == 2


grades = st.sampled_from(["0", "1", "2", "3", " 2", '"3"', "4", "x", "", "٣"]) | st.text(max_size=3)
logprobs = st.one_of(
    st.floats(max_value=0.0, allow_nan=False, allow_infinity=False), st.none(), st.text(max_size=2)
)  # (-Infinity, as Python writes -inf, is no JSON: such a line is decoded whole)
alternatives = (
    st.lists(st.fixed_dictionaries({"token": grades, "logprob": logprobs}), max_size=6) | st.none()
)


@st.composite
def tokens(draw: st.DrawFn, content: str) -> list[dict[str, Any]]:
    """The content cut into tokens, each with alternatives (and sometimes odd fields)."""
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(content) - 1)), max_size=6)))
    pieces = [content[a:b] for a, b in zip([0, *cuts], [*cuts, len(content)], strict=True)]
    out: list[dict[str, Any]] = []
    for piece in pieces:
        token: dict[str, Any] = {"token": piece, "logprob": draw(logprobs)}
        if draw(st.booleans()):
            token["top_logprobs"] = draw(alternatives)
        out.append(token)
    return out


USAGES = [
    None,
    {},
    {"prompt_tokens": 5, "completion_tokens": 2},
    {"prompt_tokens": 1.5},
    {"prompt_tokens_details": {"cached_tokens": 4}},
    {"prompt_tokens": "x"},
]
contents = st.sampled_from(
    [
        '{"reason": "on topic", "grade": 2}',
        '{"grade": 3, "reason": "yes"}',
        '{"reason": "x", "grade": "1"}',
        '{"grade": 7}',
        '{"grade": 1, "grade": 2}',
        "not json",
        "   ",
        "on topic\nGrade: 2",
        "Grade: 9",
    ]
)


@settings(max_examples=examples(400), deadline=None)
@given(
    st.data(),
    contents,
    st.sampled_from(["json_schema", "text"]),
    st.fixed_dictionaries(
        {},
        optional={
            "finish_reason": st.sampled_from(["stop", "length", "content_filter", None, 3]),
            "refusal": st.sampled_from([None, "", "I can't", 0]),
            "model": st.sampled_from(["m", "m-2024-08-06", "other", None, 5]),
            "status_code": st.sampled_from([200, 200.0, 500, "200", True]),
            "error": st.sampled_from([None, {"message": "boom"}, "", 0, False]),
            "usage": st.sampled_from(USAGES),
            "extra": st.dictionaries(st.sampled_from(["id", "x"]), values, max_size=2),
        },
    ),
)
def test_any_line_the_fast_path_takes_gives_the_dict_paths_reply(
    data: st.DataObject, content: str, mode: OutputMode, changes: dict[str, Any]
) -> None:
    record = results_line(content)
    choice = record["response"]["body"]["choices"][0]
    choice["logprobs"]["content"] = data.draw(tokens(content))
    for key in ("finish_reason",):
        if key in changes:
            choice[key] = changes[key]
    if "refusal" in changes:
        choice["message"]["refusal"] = changes["refusal"]
    if "model" in changes:
        record["response"]["body"]["model"] = changes["model"]
    if "status_code" in changes:
        record["response"]["status_code"] = changes["status_code"]
    if "error" in changes:
        record["error"] = changes["error"]
    if "usage" in changes:
        record["response"]["body"]["usage"] = changes["usage"]
    record["response"]["body"].update(changes.get("extra", {}))
    raw = json.dumps(record).encode()
    line = loads_line(raw)
    if line is None:  # every shape drawn is one the structs hold, but Python writes an
        assert b"Infinity" in raw  # infinite float as Infinity, no JSON: decoded whole
        return
    fast = REPLIES[mode].line_reply(line)
    assert fast is None or fast == _dict_reply(raw, REPLIES[mode])
    if _dict_reply(raw, REPLIES[mode]) is not None and not changes:
        assert fast is not None  # a plain valid reply is never left to the slow path


@settings(max_examples=examples(300), deadline=None)
@given(st.data(), contents, st.integers(0, 40), st.sampled_from([None, 0, 1, 2, 3]))
def test_grade_distribution_of_structs_is_that_of_the_dicts(
    data: st.DataObject, content: str, offset: int, grade: int | None
) -> None:
    logprobs = {"content": data.draw(tokens(content))}
    line = loads_line(
        json.dumps(
            {"response": {"body": {"choices": [{"logprobs": logprobs}]}}}  # (the rest absent)
        ).encode()
    )
    assert line is not None and line.response is not None and line.response.body is not None
    choices = line.response.body.choices
    assert choices is not None
    ours = grade_distribution(choices[0].logprobs, content, offset, grade=grade)
    assert ours == grade_distribution(logprobs, content, offset, grade=grade)
