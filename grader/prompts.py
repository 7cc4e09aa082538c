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
"""

from __future__ import annotations

import functools
import hashlib
import importlib.resources
import re
import string
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.errors import NotAJudgePrompt, PromptError
from grader.models import Doc, PromptRef, Query
from grader.output_modes import OUTPUT_MODES as OUTPUT_MODES  # (re-exported: callers' name)
from grader.output_modes import VENDOR_FIELDS as VENDOR_FIELDS
from grader.output_modes import OutputMode as OutputMode
from grader.output_modes import response_format, vendor_fields

REQUIRED_USER = ("query", "document")
OPTIONAL_FIELDS = ("title", "path", "symbol", "language")
SYSTEM_FIELDS = ("scale",)
_TAG = re.compile(r"</?([A-Za-z_][A-Za-z0-9_]*)>")
_CHECKOUT_DIR = Path(__file__).resolve().parents[1] / "prompts"


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

    def final_line_pattern(self) -> re.Pattern[str]:
        """The regex of the final line in text mode; group 1 is the grade as written."""
        head, _, tail = self.final_line.partition("$grade")
        parts = [r"\s*".join(re.escape(w) for w in piece.split()) for piece in (head, tail)]
        return re.compile(r"^\s*" + parts[0] + r"\s*(-?\d+(?:\.\d+)?)\s*" + parts[1] + r"\s*$")

    def response_format(self, mode: OutputMode) -> dict[str, Any] | None:
        """The `response_format` request field for an output mode (None: the mode has none)."""
        return response_format(mode, self.schema)

    def vendor_fields(self, mode: OutputMode) -> dict[str, Any]:
        """The request fields outside `response_format` that carry the schema in `mode`."""
        return vendor_fields(mode, self.schema)


# ---------------------------------------------------------------------------------------------
# Loading


def _packaged_dir() -> Path | None:
    try:
        root = importlib.resources.files("grader") / "_prompts"
    except (ModuleNotFoundError, TypeError):  # pragma: no cover
        return None
    path = Path(str(root))
    return path if path.is_dir() else None


def prompt_dirs() -> list[Path]:
    """Where shipped prompts are found: the installed wheel's `grader/_prompts`, then the
    checkout's `prompts/` folder."""
    dirs = [d for d in (_packaged_dir(), _CHECKOUT_DIR) if d is not None and d.is_dir()]
    return list(dict.fromkeys(dirs))


def shipped_prompt_files() -> list[Path]:
    """Every shipped prompt file, by stem (the first folder wins), sorted."""
    found: dict[str, Path] = {}
    for folder in prompt_dirs():
        for path in sorted(folder.glob("*.toml")):
            found.setdefault(path.stem, path)
    return [found[stem] for stem in sorted(found)]


def _is_judge_prompt(data: dict[str, Any]) -> bool:
    """Whether a shipped TOML is a judge prompt (it has messages), not other settings beside
    the prompts (the lexical judge's thresholds, `lexical-v1.toml`)."""
    return "messages" in data


def list_prompts() -> list[PromptSpec]:
    """Every shipped prompt that is a judge prompt: what `prompts list` prints and the
    unknown-prompt error names (settings files beside them, e.g. lexical thresholds, are not)."""
    specs = []
    for path in shipped_prompt_files():
        data = _read_toml(path)
        if _is_judge_prompt(data):
            specs.append(_spec_from(data, path))
    return specs


def load_prompt(name_or_path: str | Path) -> PromptSpec:
    """A prompt by file path, by shipped stem (`passage-v1`), by `name@version`, or by bare
    name (`passage`: its highest version)."""
    text = str(name_or_path)
    as_path = Path(text)
    if as_path.suffix == ".toml" or as_path.is_file():
        if not as_path.is_file():
            raise PromptError(f"{as_path}: no such prompt file")
        return _spec_from(_read_toml(as_path), as_path)
    shipped = {p.stem: p for p in shipped_prompt_files()}
    stem = text.replace("@", "-v", 1) if "@" in text else text
    versions = [s for s in shipped if re.fullmatch(re.escape(text) + r"-v\d+", s)]
    if stem not in shipped and versions:
        stem = max(versions, key=lambda s: int(s.rsplit("-v", 1)[1]))
    if stem in shipped:
        data = _read_toml(shipped[stem])
        if _is_judge_prompt(data):
            return _spec_from(data, shipped[stem])
        raise NotAJudgePrompt(
            f"{shipped[stem]} is not a judge prompt but the offline lexical judge's settings: "
            "grade with --judge lexical (its settings: --lexical-config TOML)"
        )
    known = ", ".join(spec.file_stem for spec in list_prompts()) or "none found"
    raise PromptError(
        f"unknown prompt {text!r} (shipped: {known}; or give a path to a .toml prompt file)"
    )


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PromptError(f"{path}: cannot read prompt file ({exc.strerror})") from exc
    except tomllib.TOMLDecodeError as exc:
        raise PromptError(f"{path}: not valid TOML: {exc}") from exc


def _get(data: dict[str, Any], dotted: str, kind: type | tuple[type, ...], path: Path) -> Any:
    node: Any = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise PromptError(f"{path}: missing key `{dotted}` (see prompts/passage-v1.toml)")
        node = node[part]
    if not isinstance(node, kind) or (kind is int and isinstance(node, bool)):
        raise PromptError(f"{path}: `{dotted}` must be {_kind_name(kind)}, not {node!r}")
    return node


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(k.__name__ for k in kinds)


def _spec_from(data: dict[str, Any], path: Path) -> PromptSpec:
    scale_raw = _get(data, "scale", dict, path)
    try:
        scale = {int(k): str(v) for k, v in scale_raw.items()}
    except ValueError as exc:
        raise PromptError(f"{path}: [scale] keys must be the grades 0, 1, 2, 3") from exc
    if sorted(scale) != [0, 1, 2, 3]:
        raise PromptError(f"{path}: [scale] must give the meaning of each grade 0, 1, 2, 3")
    schema = _get(data, "reply.schema", dict, path)
    extra = data.get("sampling", {}).get("extra", {})
    if not isinstance(extra, dict):
        raise PromptError(f"{path}: [sampling.extra] must be a table of parameter = value")
    spec = PromptSpec(
        name=_get(data, "name", str, path),
        version=str(_get(data, "version", (str, int), path)),
        description=_get(data, "description", str, path),
        sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
        source=str(path),
        scale=scale,
        system=_get(data, "messages.system", str, path),
        user=_get(data, "messages.user", str, path),
        reask=_get(data, "messages.reask", str, path),
        temperature=float(_get(data, "sampling.temperature", (int, float), path)),
        max_tokens=_get(data, "sampling.max_tokens", int, path),
        logprobs=_get(data, "sampling.logprobs", bool, path),
        top_logprobs=_get(data, "sampling.top_logprobs", int, path),
        doc_budget_chars=_get(data, "document.budget_chars", int, path),
        truncation_marker=str(data.get("document", {}).get("truncation_marker", "")),
        json_instruction=_get(data, "reply.json_instruction", str, path),
        text_instruction=_get(data, "reply.text_instruction", str, path),
        final_line=_get(data, "reply.final_line", str, path),
        schema=schema,
        extra_sampling=extra,
    )
    _validate(spec, path)
    return spec


def _placeholders(template: str) -> set[str]:
    names = set()
    for match in string.Template.pattern.finditer(template):
        name = match.group("named") or match.group("braced")
        if name:
            names.add(name)
        elif match.group("invalid") is not None:
            raise PromptError(f"a stray `$` at offset {match.start()}; write `$$` for a dollar")
    return names


def _validate(spec: PromptSpec, path: Path) -> None:
    try:
        user = _placeholders(spec.user)
        system = _placeholders(spec.system)
        reask = _placeholders(spec.reask)
    except PromptError as exc:
        raise PromptError(f"{path}: {exc}") from None
    allowed = set(REQUIRED_USER) | set(OPTIONAL_FIELDS)
    for where, names, ok in (
        ("messages.user", user, allowed),
        ("messages.system", system, allowed | set(SYSTEM_FIELDS)),
        ("messages.reask", reask, {"error"}),
    ):
        unknown = names - ok
        if unknown:
            raise PromptError(
                f"{path}: `{where}` uses unknown placeholder(s) "
                + ", ".join(f"${n}" for n in sorted(unknown))
                + f" (known: {', '.join('$' + n for n in sorted(ok))})"
            )
    missing = [n for n in REQUIRED_USER if n not in user]
    if missing:
        raise PromptError(
            f"{path}: `messages.user` must contain " + " and ".join(f"${n}" for n in missing)
        )
    if "$grade" not in spec.final_line:
        raise PromptError(f"{path}: `reply.final_line` must contain $grade, e.g. 'Grade: $grade'")
    if not 0 <= spec.top_logprobs <= 20:
        raise PromptError(f"{path}: `sampling.top_logprobs` must be within 0..20")
    if spec.max_tokens < 1 or spec.doc_budget_chars < 1:
        raise PromptError(f"{path}: `max_tokens` and `document.budget_chars` must be positive")


# ---------------------------------------------------------------------------------------------
# Rendering


@functools.lru_cache(maxsize=64)
def _delimiter_tags(template_text: str) -> tuple[str, ...]:
    return tuple(sorted({m.group(1) for m in _TAG.finditer(template_text)}))


@functools.lru_cache(maxsize=64)
def _prompt_tags(user: str, system: str) -> tuple[str, ...]:
    """The delimiter tags of a prompt's templates (cached on the two strings, not on their
    concatenation, which would be built and hashed again for every pair)."""
    return _delimiter_tags(user + system)


@functools.lru_cache(maxsize=64)
def _tag_pattern(tags: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile(r"<(\s*/?\s*)(" + "|".join(map(re.escape, tags)) + r")\b", re.IGNORECASE)


def neutralise(text: str, tags: list[str] | tuple[str, ...]) -> str:
    """Escape anything in untrusted text that looks like one of the prompt's delimiter tags."""
    if not tags or "<" not in text:  # every tag starts with "<"
        return text
    return _tag_pattern(tuple(tags)).sub(lambda m: "&lt;" + m.group(1) + m.group(2), text)


def truncate(text: str, budget: int, marker: str = "") -> tuple[str, bool]:
    """Cut `text` to `budget` characters (at a whitespace when one is near), marked; and whether
    it was cut."""
    if len(text) <= budget:
        return text, False
    cut = text[:budget]
    space = cut.rfind(" ", max(0, budget - 200))
    newline = cut.rfind("\n", max(0, budget - 200))
    edge = max(space, newline)
    if edge > 0:
        cut = cut[:edge]
    return cut.rstrip() + marker, True


@functools.lru_cache(maxsize=64)
def _template_lines(template: str) -> tuple[tuple[string.Template, tuple[str, ...]], ...]:
    """Each line's template and, when every placeholder on it is optional, their names."""
    compiled = []
    for line in template.splitlines():
        names = _placeholders(line)
        optional = tuple(sorted(n for n in names if n in OPTIONAL_FIELDS))
        droppable = optional if optional and len(optional) == len(names) else ()
        compiled.append((string.Template(line), droppable))
    return tuple(compiled)


def _format_string(line: str) -> str:
    """A `string.Template` line (checked by `_template_lines`: no stray `$`) as a
    `str.format_map` string giving the same text: `$$` is `$`, `$name` and `${name}` are
    `{name}`, braces are doubled."""
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
    """The template as format strings: runs of lines always kept joined into one block, and
    each line that may be left out (all its placeholders optional) a block of its own."""
    blocks: list[tuple[str, tuple[str, ...]]] = []
    run: list[str] = []
    for line, droppable in _template_lines(template):
        if droppable:
            if run:
                blocks.append(("\n".join(run), ()))
                run = []
            blocks.append((_format_string(line.template), droppable))
        else:
            run.append(_format_string(line.template))
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
    """The system message when its template uses no placeholder but `$scale` (the same for
    every pair, so rendered once); None when it depends on the pair."""
    if not _placeholders(template) <= set(SYSTEM_FIELDS):
        return None
    return _render_template(template, {"scale": scale}) + "\n\n" + instruction.strip()


def render_scale(spec: PromptSpec) -> str:
    return "\n".join(f"{grade} = {spec.scale[grade]}" for grade in sorted(spec.scale, reverse=True))


_METADATA_FIELDS = OPTIONAL_FIELDS[1:]  # the optional fields read from a document's metadata


class MessageRenderer:
    """`render_messages` for one prompt in one output mode, with what does not depend on the
    pair worked out once: the delimiter tags, the scale, the reply instruction and a system
    message that uses no field of the pair. A batch export renders a million pairs with one."""

    def __init__(self, spec: PromptSpec, mode: OutputMode = "json_schema") -> None:
        self.spec = spec
        self.tags = _prompt_tags(spec.user, spec.system)
        self.scale = render_scale(spec)
        self.instruction = (
            spec.text_instruction if mode == "text" else spec.json_instruction
        ).strip()
        self.system = _static_system(spec.system, self.scale, self.instruction)
        self._user_blocks = _template_blocks(spec.user)

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
        parts = []  # _render_template(spec.user, values), its blocks looked up once
        for text, droppable in self._user_blocks:
            if droppable:
                for name in droppable:
                    if values[name]:
                        break
                else:
                    continue  # every optional field of the line is absent: left out
            parts.append(text.format_map(values))
        return system, "\n".join(parts).strip(), truncated

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
    """Whether `render_messages` cuts this document to the prompt's budget (its `truncated`),
    told without rendering: what an imported batch reply records."""
    return is_text_truncated(spec, doc.text)


def is_text_truncated(spec: PromptSpec, text: str) -> bool:
    """`is_truncated` of a document with this text (no `Doc` needed)."""
    return len(text.strip("\n")) > spec.doc_budget_chars


def render_reask(spec: PromptSpec, error: str) -> str:
    """The user message that sends a validation error back to the model."""
    return string.Template(spec.reask).substitute(error=error).strip()
