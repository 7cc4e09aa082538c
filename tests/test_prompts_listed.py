"""`prompts list` and the unknown-prompt error name the same prompts: judge prompts only, not the
lexical judge's settings file beside them."""

from __future__ import annotations

import re

import pytest

from grader.cli.main import main
from grader.errors import PromptError
from grader.prompts import load_prompt


def _listed(capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main(["prompts", "list"]) == 0
    return [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()]


def test_the_unknown_prompt_error_names_what_prompts_list_lists(
    capsys: pytest.CaptureFixture[str],
) -> None:
    listed = _listed(capsys)
    assert "passage-v1" in listed and "lexical-v1" not in listed
    with pytest.raises(PromptError) as caught:
        load_prompt("no-such-prompt")
    named = re.search(r"shipped: ([^;]+);", str(caught.value))
    assert named is not None
    assert named.group(1).split(", ") == listed


@pytest.mark.parametrize("name", ["lexical-v1", "lexical", "lexical@1"])
def test_the_lexical_settings_are_not_a_prompt_and_the_error_says_what_to_use(name: str) -> None:
    with pytest.raises(PromptError, match="--judge lexical"):
        load_prompt(name)


def test_a_bare_name_still_loads_its_latest_version() -> None:
    assert load_prompt("passage").id == load_prompt("passage-v1").id == "passage@1"
