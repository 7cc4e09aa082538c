"""Prompt files: load, validate and render the whole request a judge sends.

A prompt file (TOML, `prompts/NAME-vVERSION.toml`) holds the system and user templates, the grade
scale's meanings, the sampling parameters, the document budget and the reply format (JSON schema,
JSON instruction, final-line format for servers without structured output). No prompt text lives in
Python. Templates use `string.Template` placeholders, which don't clash with JSON braces:

- `$query`, `$document` (required in the user template), `$title`, `$path`, `$symbol`, `$language`
  (optional: a template line whose optional placeholders are all absent is left out, so a passage
  without a title shows no empty `Title:` line), `$scale` (system template: the scale's meanings).

Documents and queries are untrusted: before they are put in the template, anything that looks like
one of the template's own delimiter tags (`<passage>`, `</query>`, ...) is escaped, so a document
cannot close its tag and talk as the instructions. The document is cut to the file's budget
(characters) and the cut is reported as `truncated`.

The modules: `spec` (the validated file, `PromptSpec`), `files` (finding and reading prompt
files), `render` (the chat messages of one pair).
"""

from __future__ import annotations

from grader.output_modes import OUTPUT_MODES, VENDOR_FIELDS, OutputMode
from grader.prompts.files import list_prompts, load_prompt, prompt_dirs, shipped_prompt_files
from grader.prompts.render import (
    MessageRenderer,
    is_text_truncated,
    is_truncated,
    neutralise,
    render_messages,
    render_reask,
    render_scale,
    truncate,
)
from grader.prompts.spec import OPTIONAL_FIELDS, REQUIRED_USER, SYSTEM_FIELDS, PromptSpec

__all__ = [
    "OPTIONAL_FIELDS",
    "OUTPUT_MODES",
    "REQUIRED_USER",
    "SYSTEM_FIELDS",
    "VENDOR_FIELDS",
    "MessageRenderer",
    "OutputMode",
    "PromptSpec",
    "is_text_truncated",
    "is_truncated",
    "list_prompts",
    "load_prompt",
    "neutralise",
    "prompt_dirs",
    "render_messages",
    "render_reask",
    "render_scale",
    "shipped_prompt_files",
    "truncate",
]
