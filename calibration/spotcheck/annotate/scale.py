"""The grade scale shown to people: meanings from a prompt file, never written in Python.

The scale's meaning belongs to the prompt file (its `[scale]` table). When no prompt is named,
people see the neutral labels 0..3.
"""

from __future__ import annotations

from grader.errors import NotAJudgePrompt, RelgradeError
from grader.models import GRADES
from grader.prompts import load_prompt

Scale = list[tuple[int, str]]


def neutral_scale() -> Scale:
    """Grades 0..3 with no meaning attached."""
    return [(g, "") for g in GRADES]


def prompt_scale(name: str) -> Scale:
    """The scale of prompt `name` (`passage`, `passage@1`, or a path to a prompt file).

    Raises PromptError when it cannot be loaded, RelgradeError when it lacks a 0..3 meaning.
    """
    try:
        spec = load_prompt(name)
    except NotAJudgePrompt:
        raise RelgradeError(
            f"{name} is the offline lexical judge's settings, not an LLM prompt: its grades have "
            "no written meanings"
        ) from None
    if set(spec.scale) != set(GRADES):
        raise RelgradeError(f"prompt {name!r} has no [scale] with meanings for 0..3")
    return [(g, spec.scale[g]) for g in GRADES]
