"""Logprobs as real servers give them (issue 24, point 3): a distribution only when the grade
tokens hold at least MIN_GRADE_MASS at the grade token, else absent with the reason; a most
likely grade other than the one given noted; raw newlines in a JSON string read leniently."""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec
import pytest

from grader.judges.llm.grade_token import MIN_GRADE_MASS, CompletionBody
from grader.judges.llm.replies import (
    LENIENT_LOGPROBS_NOTE,
    LENIENT_NOTE,
    InvalidReply,
    accepted_reply,
    parse_completion,
)
from grader.prompts import load_prompt
from tests.fakeserver import FakeServer, faults
from tests.helpers.llm_judges import make_judge, pairs

SPEC = load_prompt("passage-v1")


def body(content: str, alternatives: dict[str, float] | None = None) -> dict[str, Any]:
    """A completion whose grade digit token has these top alternatives (probabilities)."""
    logprobs = None
    if alternatives is not None:
        at = content.index('"grade": ') + len('"grade": ')
        digit = content[at]
        top = [{"token": t, "logprob": math.log(p)} for t, p in alternatives.items()]
        logprobs = {
            "content": [
                {"token": content[:at], "logprob": -0.1, "top_logprobs": []},
                {"token": digit, "logprob": math.log(alternatives[digit]), "top_logprobs": top},
                {"token": content[at + 1 :], "logprob": -0.1, "top_logprobs": []},
            ]
        }
    choice = {"message": {"content": content}, "finish_reason": "stop", "logprobs": logprobs}
    return {"choices": [choice], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}


REPLY = json.dumps({"reason": "It answers.", "grade": 2})


def test_grade_tokens_with_most_of_the_mass_give_a_renormalised_distribution() -> None:
    reply = parse_completion(
        body(REPLY, {"2": 0.6, "3": 0.2, "The": 0.1}), mode="json_object_schema", spec=SPEC
    )
    assert reply.distribution is not None
    assert sum(reply.distribution) == pytest.approx(1.0)
    assert reply.distribution[2] == pytest.approx(0.6 / 0.8)
    assert reply.notes is None


def test_grade_tokens_with_little_mass_leave_the_distribution_out_with_the_reason() -> None:
    alternatives = {"2": 0.2, "The": 0.5, "This": 0.25}  # unconstrained alternatives
    assert sum(p for t, p in alternatives.items() if t.isdigit()) < MIN_GRADE_MASS
    reply = parse_completion(body(REPLY, alternatives), mode="json_object_schema", spec=SPEC)
    assert reply.grade == 2
    assert reply.distribution is None and reply.expected_grade is None
    assert reply.notes is not None and "0.20 of the probability" in reply.notes[0]


def test_a_most_likely_grade_other_than_the_given_one_is_noted() -> None:
    reply = parse_completion(body(REPLY, {"3": 0.55, "2": 0.4}), mode="json_schema", spec=SPEC)
    assert reply.grade == 2 and reply.distribution is not None
    assert reply.notes is not None
    assert "most likely grade is 3" in reply.notes[0] and "grade given 2" in reply.notes[0]


def test_raw_newlines_in_a_json_string_are_read_leniently_and_noted() -> None:
    content = '{"reason": "Line one.\nLine two.", "grade": 1}'
    reply = parse_completion(body(content), mode="json_object_schema", spec=SPEC)
    assert (reply.grade, reply.reason) == (1, "Line one.\nLine two.")
    assert reply.notes == [LENIENT_NOTE]


LENIENT_REPLY = '{"reason": "Line one.\nLine two.", "grade": 1}'


def test_a_lenient_read_that_loses_the_logprobs_says_so() -> None:
    with_logprobs = body(LENIENT_REPLY, {"1": 0.7, "2": 0.3})
    reply = parse_completion(with_logprobs, mode="json_object_schema", spec=SPEC)
    assert (reply.grade, reply.distribution) == (1, None)
    assert reply.notes == [LENIENT_NOTE, LENIENT_LOGPROBS_NOTE]
    decoded = msgspec.json.decode(json.dumps(with_logprobs), type=CompletionBody)
    fast = accepted_reply(decoded, mode="json_object_schema", spec=SPEC)
    assert fast is not None and fast.notes == reply.notes  # a batch import's read says so too
    without = parse_completion(body(LENIENT_REPLY), mode="json_object_schema", spec=SPEC)
    assert without.notes == [LENIENT_NOTE]  # no logprobs asked: none lost


async def test_a_judgment_read_leniently_without_its_logprobs_notes_it(
    fake_server: FakeServer,
) -> None:
    fake_server.enqueue(faults.content(LENIENT_REPLY))
    judge = make_judge(fake_server)
    judgment = await judge.judge(*pairs(1)[0], key="k")
    assert (judgment.status, judgment.grade, judgment.distribution) == ("ok", 1, None)
    assert judgment.notes == [LENIENT_NOTE, LENIENT_LOGPROBS_NOTE]
    assert fake_server.requests[0]["logprobs"] is True  # they were asked for, and came back


def test_other_malformed_json_is_still_refused() -> None:
    with pytest.raises(InvalidReply) as caught:
        parse_completion(body('{"reason": "x", grade: 1}'), mode="json_schema", spec=SPEC)
    assert caught.value.kind == "malformed_json"
