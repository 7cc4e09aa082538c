"""The settings file of the `lexical` judge (TOML): scoring settings, three thresholds, provenance.

Which file, first match wins: `--lexical-config`, `RELGRADE_LEXICAL_CONFIG`, `relgrade-lexical.toml`
in the working folder, the shipped `prompts/lexical-v1.toml`. Fitting writes a complete new file,
atomically, never over the shipped one.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import tomllib
from collections.abc import Mapping
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from grader.errors import InputError
from grader.io.files import atomic_write, read_text

NonNegative = Annotated[float, Field(ge=0, allow_inf_nan=False, strict=True)]

DEFAULT_NAME = "lexical-v1.toml"
FITTED_NAME = "relgrade-lexical.toml"
FITTED_ENV = "RELGRADE_LEXICAL_CONFIG"
KIND = "lexical-thresholds"
SCORING = ("k1", "b", "stemmer", "min_token_length", "doc_fields", "stopwords")
"""The [scoring] settings (absent: the field's default)."""

Thresholds = tuple[float, float, float]


def default_config_path() -> Path:
    """Where the shipped default lives: inside an installed wheel, else in the checkout."""
    package = Path(__file__).resolve().parents[2]
    for folder in (package / "_prompts", package.parent / "prompts"):
        candidate = folder / DEFAULT_NAME
        if candidate.is_file():
            return candidate
    raise InputError(
        f"the default lexical settings file {DEFAULT_NAME} is missing",
        path=package / "_prompts" / DEFAULT_NAME,
        hint="reinstall relgrade",
    )


class LexicalConfig(BaseModel):
    """Scoring settings and thresholds of the lexical judge, as read from its TOML file."""

    model_config = ConfigDict(frozen=True)

    thresholds: tuple[NonNegative, NonNegative, NonNegative]
    k1: float = Field(1.2, ge=0)
    b: float = Field(0.75, ge=0, le=1)
    stemmer: Literal["light", "none"] = "light"
    min_token_length: int = 2
    doc_fields: tuple[str, ...] = ("title", "text")
    stopwords: tuple[str, ...] = ()
    name: str = "lexical"
    version: str = "1"
    provenance: dict[str, Any] = Field(default_factory=dict)
    path: str | None = None

    @field_validator("thresholds")
    @classmethod
    def _ascending(cls, t: Thresholds) -> Thresholds:
        if not t[0] <= t[1] <= t[2]:
            raise ValueError(f"thresholds {list(t)} are not ascending (t1 <= t2 <= t3)")
        return t

    @field_validator("stopwords", mode="before")
    @classmethod
    def _lower(cls, words: Any) -> Any:
        return [str(w).lower() for w in words] if isinstance(words, list | tuple) else words

    @cached_property
    def stopword_set(self) -> frozenset[str]:
        return frozenset(self.stopwords)

    def settings(self) -> dict[str, Any]:
        """Everything that changes a grade (not provenance): hashed into the fingerprint."""
        values = {k: getattr(self, k) for k in SCORING}
        return {**values, "thresholds": self.thresholds, "stopwords": sorted(self.stopwords)}

    @property
    def sha256(self) -> str:
        """sha256 (bare hex) of the canonical settings: the same settings, the same id anywhere.
        Provenance only: the content key hashes the settings themselves (`fingerprint`)."""
        text = json.dumps(self.settings(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


@lru_cache(maxsize=1)
def default_settings_sha256() -> str:
    """The `sha256` of the shipped default settings (read once per process)."""
    return load_lexical_config(default_config_path()).sha256


def _validated(values: dict[str, Any], path: str | Path) -> LexicalConfig:
    """The config of `values`, or an InputError saying what is wrong in the file at `path`."""
    try:
        return LexicalConfig.model_validate(values)
    except ValidationError as exc:
        said = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise InputError(f"bad lexical settings ({said})", path=path) from None


def fitted_config_path() -> Path:
    """Where fitting writes by default: $RELGRADE_LEXICAL_CONFIG, else ./relgrade-lexical.toml."""
    return Path(os.environ.get(FITTED_ENV) or FITTED_NAME)


def load_lexical_config(path: str | Path | None = None) -> LexicalConfig:
    """Read a lexical settings file (see the module docstring for which one when `path` is None)."""
    fitted = fitted_config_path()
    p = Path(path) if path is not None else fitted if fitted.is_file() else default_config_path()
    text = read_text(p)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        where = re.search(r"line (\d+)", str(exc))
        raise InputError(
            f"not valid TOML ({exc})", path=p, line=int(where.group(1)) if where else None
        ) from None
    if data.get("kind") != KIND:
        raise InputError(
            f'not a lexical settings file (kind = {data.get("kind")!r}, expected "{KIND}")', path=p
        )
    scoring = data.get("scoring", {})
    raw = data.get("thresholds")
    if not isinstance(scoring, dict) or not isinstance(raw, dict):
        raise InputError("needs the tables [scoring] and [thresholds]", path=p)
    missing = [k for k in ("t1", "t2", "t3") if k not in raw]
    if missing:
        raise InputError(f"[thresholds] lacks {', '.join(missing)}", path=p)
    values = {k: scoring[k] for k in SCORING if k in scoring}
    values["thresholds"] = [raw["t1"], raw["t2"], raw["t3"]]
    info = {k: str(data.get(k, default)) for k, default in (("name", "lexical"), ("version", "1"))}
    return _validated(
        {**values, **info, "provenance": data.get("provenance", {}), "path": str(p)}, p
    )


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value) if math.isfinite(value) else json.dumps(str(value))
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(str(value), ensure_ascii=False)


def write_thresholds(
    path: str | Path,
    thresholds: Thresholds,
    provenance: Mapping[str, Any],
    *,
    config: LexicalConfig | None = None,
) -> LexicalConfig:
    """Write a complete settings file: `config`'s settings (default file's when None) with new
    thresholds and provenance (flat key = value: str, number, bool, list). Atomic. Returns it."""
    base = config if config is not None else load_lexical_config()
    t = _validated({**base.model_dump(), "thresholds": thresholds}, path).thresholds
    lines = [
        "# relgrade lexical judge settings: a BM25-style term-overlap baseline, not an LLM.",
        "# Written by relgrade (thresholds fitted on human grades); see prompts/lexical-v1.toml.",
        f"kind = {_toml_value(KIND)}",
        f"name = {_toml_value(base.name)}",
        f"version = {_toml_value(base.version)}",
        "",
        "[scoring]",
        *(f"{k} = {_toml_value(getattr(base, k))}" for k in SCORING),
        "",
        "[thresholds]",
        *(f"t{i} = {_toml_value(v)}" for i, v in enumerate(t, start=1)),
        "",
        "[provenance]",
        *(f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in provenance.items()),
    ]
    with atomic_write(path) as out:
        out.write("\n".join(lines) + "\n")
    return load_lexical_config(path)
