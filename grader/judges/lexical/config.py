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
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

from grader.errors import InputError
from grader.io.files import atomic_write, read_text

DEFAULT_NAME = "lexical-v1.toml"
FITTED_NAME = "relgrade-lexical.toml"
FITTED_ENV = "RELGRADE_LEXICAL_CONFIG"
KIND = "lexical-thresholds"
STEMMERS = ("light", "none")
_SCORING: dict[str, Any] = {
    "k1": float,
    "b": float,
    "stemmer": str,
    "min_token_length": int,
    "doc_fields": lambda v: tuple(str(f) for f in v),
    "stopwords": lambda v: tuple(str(w).lower() for w in v),
}
"""The [scoring] settings, each with how its TOML value is read (absent: the field's default)."""

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


@dataclass(frozen=True)
class LexicalConfig:
    """Scoring settings and thresholds of the lexical judge, as read from its TOML file."""

    thresholds: Thresholds
    k1: float = 1.2
    b: float = 0.75
    stemmer: str = "light"
    min_token_length: int = 2
    doc_fields: tuple[str, ...] = ("title", "text")
    stopwords: tuple[str, ...] = ()
    name: str = "lexical"
    version: str = "1"
    provenance: dict[str, Any] = field(default_factory=dict, compare=False)
    path: str | None = field(default=None, compare=False)

    @cached_property
    def stopword_set(self) -> frozenset[str]:
        return frozenset(self.stopwords)

    def settings(self) -> dict[str, Any]:
        """Everything that changes a grade (not provenance): hashed into the fingerprint."""
        values = {k: getattr(self, k) for k in _SCORING}
        return {**values, "thresholds": self.thresholds, "stopwords": sorted(self.stopwords)}

    @property
    def sha256(self) -> str:
        """sha256 (bare hex, like an LLM prompt file's) of the canonical settings, so the same
        settings give the same id anywhere. Provenance only: the content key hashes the settings
        themselves (`LexicalJudge.fingerprint`), so this format never moved a key."""
        text = json.dumps(self.settings(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()


@lru_cache(maxsize=1)
def default_settings_sha256() -> str:
    """The `sha256` of the shipped default settings (read once per process)."""
    return load_lexical_config(default_config_path()).sha256


def check_thresholds(values: Any, *, path: str | Path | None = None) -> Thresholds:
    """Three finite, non-negative, ascending (t1 <= t2 <= t3) numbers, or an InputError."""
    if not isinstance(values, list | tuple) or len(values) != 3:
        raise InputError("thresholds must be three numbers t1 <= t2 <= t3", path=path)
    out: list[float] = []
    for v in values:
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
            raise InputError(f"threshold {v!r} is not a finite number >= 0", path=path)
        out.append(float(v))
    if not out[0] <= out[1] <= out[2]:
        raise InputError(f"thresholds {out} are not ascending (t1 <= t2 <= t3)", path=path)
    return out[0], out[1], out[2]


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
    thresholds = check_thresholds([raw["t1"], raw["t2"], raw["t3"]], path=p)
    try:
        config = LexicalConfig(
            thresholds=thresholds,
            **{k: read(scoring[k]) for k, read in _SCORING.items() if k in scoring},
            name=str(data.get("name", "lexical")),
            version=str(data.get("version", "1")),
            provenance=dict(data.get("provenance", {})),
            path=str(p),
        )
    except (TypeError, ValueError) as exc:
        raise InputError(f"a [scoring] value has the wrong type ({exc})", path=p) from None
    if config.stemmer not in STEMMERS:
        raise InputError(f"stemmer {config.stemmer!r} is not one of {STEMMERS}", path=p)
    if config.k1 < 0 or not 0 <= config.b <= 1:
        raise InputError("k1 must be >= 0 and b within 0..1", path=p)
    return config


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
    t = check_thresholds(list(thresholds), path=path)
    lines = [
        "# relgrade lexical judge settings: a BM25-style term-overlap baseline, not an LLM.",
        "# Written by relgrade (thresholds fitted on human grades); see prompts/lexical-v1.toml.",
        f"kind = {_toml_value(KIND)}",
        f"name = {_toml_value(base.name)}",
        f"version = {_toml_value(base.version)}",
        "",
        "[scoring]",
        *(f"{k} = {_toml_value(getattr(base, k))}" for k in _SCORING),
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
