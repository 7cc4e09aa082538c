"""The prompt each judgment was graded with, so that a sample shows each document cut as the
LLM saw it."""

from __future__ import annotations

from grader.errors import RelgradeError
from grader.models import Judgment
from grader.prompts.files import load_prompt
from grader.prompts.spec import PromptSpec


def prompt_budgets(
    chosen: str | None, judgments: list[Judgment], pairs: set[tuple[str, str]]
) -> dict[tuple[str, str], PromptSpec]:
    """The prompt each sampled pair was graded with (`chosen`: the --prompt for every pair), so
    its document is cut as the LLM saw it. A pair whose prompt is unknown or not an LLM prompt
    (qrels, the lexical judge) keeps its whole text."""
    specs: dict[str, PromptSpec | None] = {}

    def spec_of(name: str) -> PromptSpec | None:
        if name not in specs:
            try:
                specs[name] = load_prompt(name)
            except RelgradeError:
                if name == chosen:
                    raise
                specs[name] = None  # e.g. the lexical judge's: it read the whole text
        return specs[name]

    budgets: dict[tuple[str, str], PromptSpec] = {}
    for j in judgments:
        pair = (j.query_id, j.doc_id)
        name = chosen or (str(j.prompt) if j.prompt else None)
        if pair in pairs and name:
            spec = spec_of(name)
            if spec is not None:
                budgets[pair] = spec
    return budgets
