"""Prompt files (TOML: templates, scale, sampling, document budget, reply format; no prompt text
lives in Python): load, validate and render the whole request a judge sends, texts that look like
the template's delimiter tags escaped so a document cannot talk as the instructions."""

from __future__ import annotations

from grader.output_modes import OUTPUT_MODES, VENDOR_FIELDS, OutputMode
from grader.prompts.files import PromptSpec, list_prompts, load_prompt, shipped_prompt_files
from grader.prompts.render import (
    MessageRenderer,
    is_text_truncated,
    is_truncated,
    render_messages,
    render_reask,
    truncate,
)

__all__ = [
    "OUTPUT_MODES",
    "VENDOR_FIELDS",
    "MessageRenderer",
    "OutputMode",
    "PromptSpec",
    "is_text_truncated",
    "is_truncated",
    "list_prompts",
    "load_prompt",
    "render_messages",
    "render_reask",
    "shipped_prompt_files",
    "truncate",
]
