"""A chat.completion body whose `message` is not an object is an invalid reply (re-asked, then a
failure), never an unexpected exception out of the validator."""

from __future__ import annotations

from typing import Any

import pytest

from grader.judges.llm.replies import InvalidReply, parse_completion
from grader.prompts import load_prompt


@pytest.mark.parametrize("message", ["grade: 3", ["3"], 3])
def test_a_message_that_is_not_an_object_is_an_invalid_reply(message: Any) -> None:
    body = {"choices": [{"message": message, "finish_reason": "stop"}]}
    with pytest.raises(InvalidReply) as info:
        parse_completion(body, mode="json_schema", spec=load_prompt("passage"))
    assert info.value.kind == "empty"
