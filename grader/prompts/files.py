"""Prompt files: a file's validated contents (`PromptSpec`) and the placeholders its templates may
use (`$query` and `$document` required in the user template, the optional `$title`, `$path`,
`$symbol` and `$language`, `$scale` in the system one); found by path, shipped stem
(`passage-v1`), `name@version` or bare name (its highest version) in the wheel's
`grader/_prompts`, then the checkout's `prompts/`; and the prompts of stored judgments."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import importlib.resources
import re
import string
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grader.errors import NotAJudgePrompt, PromptError, RelgradeError
from grader.models import Judgment, PromptRef
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


_CHECKOUT_DIR = Path(__file__).resolve().parents[2] / "prompts"
_PACKAGED_DIR = Path(str(importlib.resources.files("grader") / "_prompts"))


def shipped_prompt_files() -> list[Path]:
    """Every shipped prompt file, by stem (the wheel's `grader/_prompts` first, then the
    checkout's `prompts/`), sorted."""
    found: dict[str, Path] = {}
    for folder in dict.fromkeys(d for d in (_PACKAGED_DIR, _CHECKOUT_DIR) if d.is_dir()):
        for path in sorted(folder.glob("*.toml")):
            found.setdefault(path.stem, path)
    return [found[stem] for stem in sorted(found)]


def list_prompts() -> list[PromptSpec]:
    """Every shipped judge prompt (not the settings files beside them)."""
    specs = []
    for path in shipped_prompt_files():
        data = _read_toml(path)
        if "messages" in data:  # not settings beside the prompts (the lexical judge's)
            specs.append(_spec_from(data, path))
    return specs


def load_prompt(name_or_path: str | Path) -> PromptSpec:
    """A prompt by path, shipped stem, `name@version` or bare name (its highest version)."""
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
        if "messages" in data:
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
        kinds = " or ".join(k.__name__ for k in (kind if isinstance(kind, tuple) else (kind,)))
        raise PromptError(f"{path}: `{dotted}` must be {kinds}, not {node!r}")
    return node


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


def _validate(spec: PromptSpec, path: Path) -> None:
    try:
        user, system, reask = map(placeholders, (spec.user, spec.system, spec.reask))
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


def prompt_budgets(
    chosen: str | None, judgments: list[Judgment], pairs: set[tuple[str, str]]
) -> dict[tuple[str, str], PromptSpec]:
    """The prompt each sampled pair was graded with, so its document is cut as the LLM saw it."""

    @functools.cache
    def spec_of(name: str) -> PromptSpec | None:
        try:
            return load_prompt(name)
        except RelgradeError:
            if name == chosen:
                raise
            return None  # e.g. the lexical judge's: it read the whole text

    budgets: dict[tuple[str, str], PromptSpec] = {}
    for j in judgments:
        pair = (j.query_id, j.doc_id)
        name = chosen or (str(j.prompt) if j.prompt else None)
        spec = spec_of(name) if pair in pairs and name else None
        if spec is not None:
            budgets[pair] = spec
    return budgets
