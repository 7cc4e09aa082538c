"""Rendering the chat messages of one (query, document) pair: a line whose optional placeholders are
all absent is left out, texts that look like delimiter tags are escaped, the document is cut to the
prompt's budget and the cut reported."""

from __future__ import annotations

import functools
import re
import string

from grader.models import Doc, Query
from grader.output_modes import OutputMode
from grader.prompts.files import OPTIONAL_FIELDS, SYSTEM_FIELDS, PromptSpec, placeholders

_TAG = re.compile(r"</?([A-Za-z_][A-Za-z0-9_]*)>")


@functools.lru_cache(maxsize=64)
def _prompt_tags(user: str, system: str) -> tuple[str, ...]:
    """The delimiter tags of a prompt's templates (cached on the two strings)."""
    return tuple(sorted({m.group(1) for t in (user, system) for m in _TAG.finditer(t)}))


@functools.lru_cache(maxsize=64)
def _tag_pattern(tags: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(r"<(\s*/?\s*)(" + "|".join(map(re.escape, tags)) + r")\b", re.IGNORECASE)


def neutralise(text: str, tags: list[str] | tuple[str, ...]) -> str:
    """Escape anything in untrusted text that looks like one of the prompt's delimiter tags."""
    if not tags or "<" not in text:  # every tag starts with "<"
        return text
    return _tag_pattern(tuple(tags)).sub(lambda m: "&lt;" + m.group(1) + m.group(2), text)


def truncate(text: str, budget: int, marker: str = "") -> tuple[str, bool]:
    """Cut `text` to `budget` characters (at a nearby whitespace), marked; and whether cut."""
    if len(text) <= budget:
        return text, False
    cut = text[:budget]
    space = cut.rfind(" ", max(0, budget - 200))
    newline = cut.rfind("\n", max(0, budget - 200))
    edge = max(space, newline)
    if edge > 0:
        cut = cut[:edge]
    return cut.rstrip() + marker, True


def _format_string(line: str) -> str:
    """A `string.Template` line as a `str.format_map` string giving the same text."""
    out: list[str] = []
    last = 0
    for match in string.Template.pattern.finditer(line):
        out.append(line[last : match.start()].replace("{", "{{").replace("}", "}}"))
        name = match.group("named") or match.group("braced")
        out.append("{" + name + "}" if name else "$")
        last = match.end()
    out.append(line[last:].replace("{", "{{").replace("}", "}}"))
    return "".join(out)


@functools.lru_cache(maxsize=64)
def _template_blocks(template: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The template as format strings; each line that may be left out a block alone."""
    blocks: list[tuple[str, tuple[str, ...]]] = []
    run: list[str] = []
    for line in template.splitlines():
        names = placeholders(line)
        optional = tuple(sorted(n for n in names if n in OPTIONAL_FIELDS))
        if optional and len(optional) == len(names):
            if run:
                blocks.append(("\n".join(run), ()))
                run = []
            blocks.append((_format_string(line), optional))
        else:
            run.append(_format_string(line))
    if run:
        blocks.append(("\n".join(run), ()))
    return tuple(blocks)


def _render_template(template: str, values: dict[str, str]) -> str:
    """Substitute line by line, leaving out lines whose optional fields are all absent."""
    parts = [
        text.format_map(values)
        for text, droppable in _template_blocks(template)
        if not droppable or any(values.get(n) for n in droppable)
    ]
    return "\n".join(parts).strip()


@functools.lru_cache(maxsize=64)
def _static_system(template: str, scale: str, instruction: str) -> str | None:
    """The system message when it uses no field of the pair (rendered once), else None."""
    if not placeholders(template) <= set(SYSTEM_FIELDS):
        return None
    return _render_template(template, {"scale": scale}) + "\n\n" + instruction.strip()


def render_scale(spec: PromptSpec) -> str:
    return "\n".join(f"{grade} = {spec.scale[grade]}" for grade in sorted(spec.scale, reverse=True))


_METADATA_FIELDS = OPTIONAL_FIELDS[1:]  # the optional fields read from a document's metadata


class MessageRenderer:
    """`render_messages` for one prompt and mode, what no pair changes worked out once."""

    def __init__(self, spec: PromptSpec, mode: OutputMode = "json_schema") -> None:
        self.spec = spec
        self.tags = _prompt_tags(spec.user, spec.system)
        self.scale = render_scale(spec)
        self.instruction = (
            spec.text_instruction if mode == "text" else spec.json_instruction
        ).strip()
        self.system = _static_system(spec.system, self.scale, self.instruction)

    def contents(self, query: Query, doc: Doc) -> tuple[str, str, bool]:
        """The system and user messages' texts for one pair, and whether the document was cut."""
        spec, tags = self.spec, self.tags
        body, truncated = truncate(
            doc.text.strip("\n"), spec.doc_budget_chars, spec.truncation_marker
        )
        values = {
            "query": neutralise(query.text.strip(), tags),
            "document": neutralise(body, tags),
            "title": neutralise((doc.title or "").strip(), tags),
            "scale": self.scale,
        }
        metadata = doc.metadata
        for name in _METADATA_FIELDS:
            raw = metadata.get(name) if metadata else None
            values[name] = neutralise(str(raw).strip(), tags) if raw not in (None, "") else ""
        system = self.system
        if system is None:
            system = _render_template(spec.system, values) + "\n\n" + self.instruction
        return system, _render_template(spec.user, values), truncated

    def messages(self, query: Query, doc: Doc) -> tuple[list[dict[str, str]], bool]:
        """The chat messages for one pair, and whether the document was cut."""
        system, user, truncated = self.contents(query, doc)
        return [{"role": "system", "content": system}, {"role": "user", "content": user}], truncated


def render_messages(
    spec: PromptSpec, query: Query, doc: Doc, *, mode: OutputMode = "json_schema"
) -> tuple[list[dict[str, str]], bool]:
    """The chat messages for one pair in one output mode, and whether the document was cut."""
    return MessageRenderer(spec, mode).messages(query, doc)


def is_truncated(spec: PromptSpec, doc: Doc) -> bool:
    """Whether `render_messages` cuts this document, told without rendering."""
    return is_text_truncated(spec, doc.text)


def is_text_truncated(spec: PromptSpec, text: str) -> bool:
    """`is_truncated` of a document with this text (no `Doc` needed)."""
    return len(text.strip("\n")) > spec.doc_budget_chars


def render_reask(spec: PromptSpec, error: str) -> str:
    """The user message that sends a validation error back to the model."""
    return string.Template(spec.reask).substitute(error=error).strip()
