"""A prompt file's contents once validated (`PromptSpec`), and the placeholders its templates
may use: `$query` and `$document` (required in the user template), the optional `$title`,
`$path`, `$symbol` and `$language`, and `$scale` (system template)."""

from __future__ import annotations

import dataclasses
import re
import string
from dataclasses import dataclass, field
from typing import Any

from grader.errors import PromptError
from grader.models import PromptRef
from grader.output_modes import GRAMMAR_MODES, VENDOR_FIELDS, OutputMode, bounded_strings

REQUIRED_USER = ("query", "document")
OPTIONAL_FIELDS = ("title", "path", "symbol", "language")
SYSTEM_FIELDS = ("scale",)


@dataclass(frozen=True)
class PromptSpec:
    """One prompt file, validated. `sha256` is the hex digest of the file's bytes."""

    name: str
    version: str
    description: str
    sha256: str
    source: str
    scale: dict[int, str]
    system: str
    user: str
    reask: str
    temperature: float
    max_tokens: int
    logprobs: bool
    top_logprobs: int
    doc_budget_chars: int
    truncation_marker: str
    json_instruction: str
    text_instruction: str
    final_line: str
    schema: dict[str, Any] = field(default_factory=dict)
    extra_sampling: dict[str, Any] = field(default_factory=dict)
    """`[sampling.extra]`: parameters some servers take beyond OpenAI's (llama.cpp's
    `repeat_penalty`, vLLM's `top_k`, ...), sent as they are (the SDK's `extra_body`)."""

    @property
    def id(self) -> str:
        """`name@version`, as stored in judgments."""
        return f"{self.name}@{self.version}"

    @property
    def file_stem(self) -> str:
        """The shipped file's stem, `name-vVERSION` (what `--prompt` accepts)."""
        return f"{self.name}-v{self.version}"

    def ref(self) -> PromptRef:
        return PromptRef(name=self.name, version=self.version, sha256=self.sha256)

    def sampling(self) -> dict[str, Any]:
        """The sampling parameters (part of every content key)."""
        sampling: dict[str, Any] = {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "logprobs": self.logprobs,
            "top_logprobs": self.top_logprobs if self.logprobs else 0,
        }
        if self.extra_sampling:  # (only then: the keys of every other prompt stay as they were)
            sampling["extra"] = dict(sorted(self.extra_sampling.items()))
        return sampling

    def without_logprobs(self) -> PromptSpec:
        """This prompt asking for no logprobs (`--no-logprobs`): other content keys."""
        return self if not self.logprobs else dataclasses.replace(self, logprobs=False)

    def final_line_pattern(self) -> re.Pattern[str]:
        """The regex of the final line in text mode; group 1 is the grade as written."""
        head, _, tail = self.final_line.partition("$grade")
        parts = [r"\s*".join(re.escape(w) for w in piece.split()) for piece in (head, tail)]
        return re.compile(r"^\s*" + parts[0] + r"\s*(-?\d+(?:\.\d+)?)\s*" + parts[1] + r"\s*$")

    def response_format(self, mode: OutputMode) -> dict[str, Any] | None:
        """The `response_format` request field of `mode` (None: the mode sends none)."""
        schema = self.request_schema(mode)
        if mode == "json_schema":
            named = {"name": "relevance_grade", "strict": True, "schema": schema}
            return {"type": "json_schema", "json_schema": named}
        if mode == "json_object_schema":
            return {"type": "json_object", "schema": schema}
        return {"type": "json_object"} if mode == "json_object" else None

    def vendor_fields(self, mode: OutputMode) -> dict[str, Any]:
        """The request fields outside `response_format` that carry the schema in `mode`."""
        name = VENDOR_FIELDS.get(mode)
        if name is None:
            return {}
        schema = self.request_schema(mode)
        return {name: {"json": schema} if name == "structured_outputs" else schema}

    def request_schema(self, mode: OutputMode) -> dict[str, Any]:
        """The reply schema as sent in `mode` (strings bounded in a grammar mode)."""
        if mode in GRAMMAR_MODES:
            return bounded_strings(self.schema, self.max_tokens)
        return self.schema


def placeholders(template: str) -> set[str]:
    """The placeholder names a `string.Template` text uses; PromptError for a stray `$`."""
    names = set()
    for match in string.Template.pattern.finditer(template):
        name = match.group("named") or match.group("braced")
        if name:
            names.add(name)
        elif match.group("invalid") is not None:
            raise PromptError(f"a stray `$` at offset {match.start()}; write `$$` for a dollar")
    return names
