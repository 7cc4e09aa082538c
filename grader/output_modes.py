"""The output modes a judge can ask a server for: every mode but `text` asks for a JSON reply
holding the prompt file's schema; they differ in where the schema goes (docs/servers.md)."""

from __future__ import annotations

from typing import Any, Literal, get_args

OutputMode = Literal[
    "json_schema",
    "json_object_schema",
    "json_object",
    "text",
    "vllm_structured_outputs",
    "vllm_guided_json",
    "ollama_format",
]
OUTPUT_MODES: tuple[OutputMode, ...] = get_args(OutputMode)
"""Every output mode: OpenAI's JSON schema; llama.cpp's JSON mode with a schema; plain JSON mode;
the prompt's strict final line; vLLM's two request fields; Ollama's `format` (docs/servers.md)."""
VENDOR_FIELDS: dict[str, str] = {
    "vllm_structured_outputs": "structured_outputs",
    "vllm_guided_json": "guided_json",
    "ollama_format": "format",
}
"""The request field that carries the schema in each mode outside `response_format`."""
GRAMMAR_MODES = frozenset({"json_object_schema", *VENDOR_FIELDS})
"""Modes whose server samples the reply under a grammar of the schema (`bounded_strings`)."""
CHARS_PER_TOKEN = 3
"""Characters a reply's token is counted for: below prose's average of four, so a reason at the
bound fits its tokens (one cut off anyway fails, never as a grade)."""
RESERVED_TOKENS = 30
"""Tokens of a reply kept for its JSON braces, key names and grade, beside its strings."""


def bounded_strings(schema: dict[str, Any], max_tokens: int) -> dict[str, Any]:
    """`schema` with a `maxLength` on each top-level string property that has none, so a reply under
    a grammar ends its reason in time to write the grade (GRAMMAR_MODES only; same content key)."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return schema
    strings = [
        name
        for name, field in properties.items()
        if isinstance(field, dict) and field.get("type") == "string" and "maxLength" not in field
    ]
    if not strings:
        return schema
    share = max(1, CHARS_PER_TOKEN * (max_tokens - RESERVED_TOKENS) // len(strings))
    bounded = {name: {**properties[name], "maxLength": share} for name in strings}
    return {**schema, "properties": {**properties, **bounded}}
