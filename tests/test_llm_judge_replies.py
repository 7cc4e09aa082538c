"""The reply validator (shared by live grading and the Batch API) and logprobs -> P(grade)."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from grader.judges.llm.grade_token import grade_distribution, top_level_grade_offset
from grader.judges.llm.replies import (
    _STRICT_JSON,
    BARE_GRADE_NOTE,
    InvalidReply,
    _decode_strict,
    parse_body,
    parse_completion,
)
from grader.models import Usage
from grader.prompts import OutputMode, load_prompt

SPEC = load_prompt("passage-v1")


def body(
    content: Any, *, finish: str = "stop", refusal: str | None = None, **extra: Any
) -> dict[str, Any]:
    return {
        "choices": [
            {
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "finish_reason": finish,
                **extra,
            }
        ],
        "usage": {
            "prompt_tokens": 100,
            "completion_tokens": 12,
            "prompt_tokens_details": {"cached_tokens": 40},
        },
    }


def kind_of(reply: dict[str, Any], mode: OutputMode = "json_schema") -> str:
    with pytest.raises(InvalidReply) as caught:
        parse_completion(reply, mode=mode, spec=SPEC)
    assert caught.value.usage == Usage(prompt_tokens=100, completion_tokens=12, cached_tokens=40)
    return caught.value.kind


def test_valid_json_reply() -> None:
    reply = parse_completion(
        body('{"reason": "answers it", "grade": 3}'), mode="json_schema", spec=SPEC
    )
    assert (reply.grade, reply.reason, reply.distribution) == (3, "answers it", None)
    assert reply.usage == Usage(prompt_tokens=100, completion_tokens=12, cached_tokens=40)


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        ('{"reason": "x", "grade": 4}', "out_of_range"),
        ('{"reason": "x", "grade": -1}', "out_of_range"),
        ('{"reason": "x", "grade": 2.5}', "schema"),
        ('{"reason": "x", "grade": true}', "schema"),
        ('{"reason": "x", "grade": "two"}', "schema"),
        ('{"reason": "x"}', "schema"),
        ("[2]", "schema"),
        ("3", "schema"),
        ('{"grade": 3, "grade": 0}', "schema"),
        ('{"reason": "a", "grade": 1, "reason": "b"}', "schema"),
        ('{"reason": "x", "grade": "\u0663"}', "schema"),
        ('{"reason": "x", "grade": "\uff13"}', "schema"),
        ('{"reason": "x", "grade": "٣"}', "schema"),
        ("{'grade': 2}", "malformed_json"),
        ("Grade: 2", "malformed_json"),
        ("", "empty"),
        (None, "empty"),
    ],
)
def test_invalid_json_replies_are_refused_never_graded(content: Any, kind: str) -> None:
    assert kind_of(body(content)) == kind


def test_a_lone_digit_string_is_accepted_as_the_grade() -> None:
    reply = parse_completion(body('{"reason": "r", "grade": "2"}'), mode="json_object", spec=SPEC)
    assert reply.grade == 2


def test_refusal_length_filter_and_missing_choices() -> None:
    assert kind_of(body(None, refusal="I can't.")) == "refusal"
    assert kind_of(body('{"reason": "cut', finish="length")) == "length"
    assert kind_of(body('{"reason": "x", "grade": 1}', finish="content_filter")) == "content_filter"
    no_choice = {"choices": [], "usage": body("")["usage"]}
    assert kind_of(no_choice) == "no_choice"


@pytest.mark.parametrize(
    ("content", "grade", "reason"),
    [
        ("It answers the question.\nGrade: 3", 3, "It answers the question."),
        ("Partly.\n\nGrade:1\n", 1, "Partly."),
        ("**Grade: 2**", 2, None),
        ("Reason with a 3 in it.\n  Grade:   0  ", 0, "Reason with a 3 in it."),
    ],
)
def test_final_line_mode(content: str, grade: int, reason: str | None) -> None:
    reply = parse_completion(body(content), mode="text", spec=SPEC)
    assert (reply.grade, reply.reason) == (grade, reason)


@pytest.mark.parametrize(
    ("content", "kind"),
    [
        ("Grade: 3\nbut then more text", "no_final_line"),
        ("I would say 2.", "no_final_line"),
        ("Grade: two", "no_final_line"),
        ("Grade: 5", "out_of_range"),
        ("Grade: 2.5", "out_of_range"),
        ("Grade: 2 or 3", "no_final_line"),
        ("Grade: ٢", "out_of_range"),
        ("Grade: ３", "out_of_range"),
    ],
)
def test_final_line_mode_takes_no_stray_digit(content: str, kind: str) -> None:
    assert kind_of(body(content), mode="text") == kind


@pytest.mark.parametrize("content", ["3", " 3\n", "**3**", "`3`"])
def test_a_bare_grade_is_that_grade_with_a_note(content: str) -> None:
    """Small models answer `3` to `Grade: N`: the grade as written, said, never asked again."""
    reply = parse_completion(body(content), mode="text", spec=SPEC)
    assert (reply.grade, reply.reason) == (3, None)
    assert reply.notes is not None and BARE_GRADE_NOTE in reply.notes


@pytest.mark.parametrize(
    ("content", "kind"), [("7", "out_of_range"), ("-1", "out_of_range"), ("3\n2", "no_final_line")]
)
def test_a_bare_number_off_the_scale_is_no_grade(content: str, kind: str) -> None:
    assert kind_of(body(content), mode="text") == kind


def test_parse_body_keeps_a_non_json_body() -> None:
    with pytest.raises(InvalidReply) as caught:
        parse_body("<html>oops</html>")
    assert (caught.value.kind, caught.value.raw) == ("not_json_body", "<html>oops</html>")
    assert parse_body('{"choices": []}') == {"choices": []}


def tok(text: str, p: float, top: dict[str, float] | None = None) -> dict[str, Any]:
    return {
        "token": text,
        "logprob": math.log(p),
        "top_logprobs": [{"token": t, "logprob": math.log(q)} for t, q in (top or {}).items()],
    }


def test_distribution_sums_spellings_and_ignores_other_tokens() -> None:
    content = '{"reason": "r", "grade": 2}'
    offset = content.index("2}")
    tokens = [
        tok(content[:offset], 0.9),
        tok("2", 0.5, {"2": 0.5, " 2": 0.1, "1": 0.2, "x": 0.1, "3": 0.1}),
        tok("}", 0.99),
    ]
    dist = grade_distribution({"content": tokens}, content, offset)
    assert dist == pytest.approx([0.0, 0.2 / 0.9, 0.6 / 0.9, 0.1 / 0.9])
    reply = parse_completion(
        body(content, logprobs={"content": tokens}), mode="json_schema", spec=SPEC
    )
    assert reply.expected_grade == pytest.approx((0.2 + 1.2 + 0.3) / 0.9)
    assert reply.confidence == pytest.approx(0.6 / 0.9)


def test_alternatives_that_are_not_strings_are_passed_over() -> None:
    """A malformed alternative (a number, null, a list as its token) is no grade token."""
    content = '{"grade": 2}'
    offset = content.index("2}")
    odd = [{"token": 2, "logprob": -0.1}, {"token": None}, {"token": ["2"], "logprob": -0.1}, 7]
    hit = tok("2", 0.5, {"2": 0.5, "1": 0.3}) | {}
    hit["top_logprobs"] = [*hit["top_logprobs"], *odd]
    dist = grade_distribution({"content": [tok(content[:offset], 0.9), hit]}, content, offset)
    assert dist == pytest.approx([0.0, 0.3 / 0.8, 0.5 / 0.8, 0.0])


def test_distribution_adds_the_chosen_token_when_not_among_the_top() -> None:
    content = "Grade: 1"
    tokens = [tok("Grade:", 0.9), tok(" 1", 0.5, {" 2": 0.3})]
    dist = grade_distribution({"content": tokens}, content, 7)
    assert dist == pytest.approx([0.0, 0.5 / 0.8, 0.3 / 0.8, 0.0])


def _split_at(content: str, offset: int, top: dict[str, float]) -> list[dict[str, Any]]:
    """Tokens: everything before `offset`, the one digit there (with `top`), the rest."""
    digit = content[offset]
    return [
        tok(content[:offset], 0.9),
        tok(digit, top[digit], top),
        tok(content[offset + 1 :], 0.9),
    ]


def test_distribution_is_read_from_the_top_level_grade_token() -> None:
    """A nested `"grade"` (after or before the real one) never lends its logprobs."""
    top_one = {"1": 0.8, "0": 0.1, "2": 0.1}
    for content in ('{"grade": 1, "alt": {"grade": 3}}', '{"alt": {"grade": 3}, "grade": "1"}'):
        real = content.rindex("1")
        nested = content.index("3")
        first, second = sorted((real, nested))
        tokens = [
            tok(content[:first], 0.9),
            tok(content[first], 0.8, top_one if first == real else {"3": 0.97, "2": 0.03}),
            tok(content[first + 1 : second], 0.9),
            tok(content[second], 0.8, top_one if second == real else {"3": 0.97, "2": 0.03}),
            tok(content[second + 1 :], 0.9),
        ]
        reply = parse_completion(
            body(content, logprobs={"content": tokens}), mode="json_object", spec=SPEC
        )
        assert reply.grade == 1
        assert reply.distribution == pytest.approx([0.1, 0.8, 0.1, 0.0])
        assert reply.expected_grade == pytest.approx(1.0)


def test_no_distribution_when_the_grade_token_disagrees_with_the_grade() -> None:
    content = '{"reason": "r", "grade": 1}'
    offset = content.index("1}")
    tokens = _split_at(content, offset, {"1": 0.6, "2": 0.4})
    tokens[1] = tok("2", 0.4, {"1": 0.6, "2": 0.4})  # logprobs of some other reply
    reply = parse_completion(
        body(content, logprobs={"content": tokens}), mode="json_schema", spec=SPEC
    )
    assert reply.grade == 1
    assert (reply.distribution, reply.expected_grade, reply.confidence) == (None, None, None)
    agreeing = parse_completion(
        body(content, logprobs={"content": _split_at(content, offset, {"1": 0.6, "2": 0.4})}),
        mode="json_schema",
        spec=SPEC,
    )
    assert agreeing.distribution == pytest.approx([0.0, 0.6, 0.4, 0.0])


def test_no_distribution_when_logprobs_are_absent_or_the_token_is_merged() -> None:
    content = '{"grade":2}'
    assert grade_distribution(None, content, 9) is None
    assert grade_distribution({"content": []}, content, 9) is None
    merged = [tok('{"grade":', 0.9), tok("2}", 0.9, {"2}": 0.9, "3}": 0.1})]
    assert grade_distribution({"content": merged}, content, 9) is None


@given(st.lists(st.floats(min_value=1e-6, max_value=1.0), min_size=4, max_size=4))
def test_distribution_is_a_probability_vector(weights: list[float]) -> None:
    content = "Grade: 0"
    top = {str(g): w / (sum(weights) * 1.01) for g, w in enumerate(weights)}
    dist = grade_distribution(
        {"content": [tok("Grade: ", 0.9), tok("0", top["0"], top)]}, content, 7
    )
    assert isinstance(dist, list) and sum(dist) == pytest.approx(1.0)
    assert all(0.0 <= p <= 1.0 for p in dist)


def test_usage_without_details() -> None:
    reply = body('{"reason": "r", "grade": 0}')
    reply["usage"] = {"prompt_tokens": 5, "completion_tokens": 2}
    parsed = parse_completion(reply, mode="json_schema", spec=SPEC)
    assert parsed.usage == Usage(prompt_tokens=5, completion_tokens=2, cached_tokens=0)
    assert json.loads(parsed.raw)["grade"] == 0


GRADE_VALUES = st.one_of(
    st.integers(-5, 9),
    st.booleans(),
    st.floats(allow_nan=False),
    st.sampled_from(["2", " 3 ", "٣", "x", ""]),
    st.none(),
)
REASON_VALUES = st.one_of(st.none(), st.text(max_size=8), st.integers(), st.lists(st.integers()))


class _ReplyModel(BaseModel):
    """The reply schema as pydantic reads it: an integer grade (a lone ASCII digit string is
    accepted; a bool or a float is not) and an optional string reason."""

    model_config = ConfigDict(extra="ignore")

    grade: int
    reason: str | None = None

    @field_validator("grade", mode="before")
    @classmethod
    def _strict_grade(cls, value: Any) -> Any:
        if isinstance(value, bool | float) or (
            isinstance(value, str) and not re.fullmatch(r"\s*-?[0-9]+\s*", value)
        ):
            raise ValueError(f"grade must be an integer 0..3, got {value!r}")
        return int(value) if isinstance(value, str) else value


@given(grade=GRADE_VALUES, reason=REASON_VALUES, extra=st.booleans())
def test_a_json_reply_reads_as_its_schema_model_reads_it(
    grade: Any, reason: Any, extra: bool
) -> None:
    """The validator reads a grade and reason as pydantic's model of the schema reads them: the
    outcome (grade and reason, or the error's kind) is the model's."""
    data = {"reason": reason, "grade": grade, **({"other": [1]} if extra else {})}
    try:
        model = _ReplyModel.model_validate(data)
        expected: Any = (
            (model.grade, model.reason or None) if model.grade in (0, 1, 2, 3) else "out_of_range"
        )
    except ValidationError:
        expected = "schema"
    try:
        reply = parse_completion(body(json.dumps(data)), mode="json_schema", spec=SPEC)
        got: Any = (reply.grade, reply.reason)
    except InvalidReply as exc:
        got = exc.kind
    assert got == expected


@pytest.mark.parametrize(
    "content",
    [
        '{"reason": "r", "grade": 2}',
        '{"reason":"r","grade":2}',
        '  {\n  "reason" :\t"r" ,\n\r "grade"  :  2 \n}  ',
        '{"reason": {"grade": 1}, "grade": 3}',
        '{"grade": "1", "reason": "grade: 0"}',
        '{"reason": "\u2003 spaced \u2003", "grade":\n0}',
        '{"reason": "say \\"grade\\": 1", "grade": 2}',
        '{"reason": "a\\\\", "grade": 1}',
        '{"grade": 3, "reason": "first"}',
    ],
)
def test_the_grade_token_is_found_whatever_the_spacing(content: str) -> None:
    offset = top_level_grade_offset(content)
    assert offset is not None
    assert content[offset] == str(json.loads(content)["grade"])
    assert top_level_grade_offset('{"reason": "r"}') is None
    assert top_level_grade_offset('["grade", 1]') is None


_REPLY_BITS = st.sampled_from(
    ['{"grade": 2}', '{"reason": "r", "grade": 1}', "{", "}", " ", '"grade"', ":", ",", "3", "x"]
)


@given(st.lists(_REPLY_BITS, max_size=6).map("".join))
def test_the_quick_decode_is_decode_value_and_error_alike(content: str) -> None:
    """`_decode_strict` (the batch import's fast path: 0.90-0.94x its time on
    bench/batch_files.py) gives what `_STRICT_JSON.decode` gives, or raises what it raises."""

    def outcome(decode: Any) -> Any:
        try:
            return ("value", decode(content))
        except Exception as exc:  # the same type and words
            return (type(exc).__name__, str(exc))

    assert outcome(_decode_strict) == outcome(_STRICT_JSON.decode)
