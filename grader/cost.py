"""What grading costs: a TOML price table (`grader/prices.toml`, extended by a user file or
`RELGRADE_PRICES`; a model without a price costs None, never a made-up price), the cost of a Usage,
and the --dry-run estimate of a request and its reply (at `max_tokens`, and as expected)."""

from __future__ import annotations

import importlib.resources
import json
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grader.errors import InputError
from grader.models import Usage

CHARS_PER_TOKEN = 4
PER_TOKENS = 1_000_000
_SNAPSHOT = re.compile(r"(.+?)-(\d{4}-\d{2}-\d{2}|\d{4}|latest)")


@dataclass(frozen=True)
class ModelPrice:
    """USD per 1M tokens."""

    input: float
    cached_input: float
    output: float


@dataclass(frozen=True)
class PriceTable:
    """Prices per model and the Batch API discount (a fraction of the live price)."""

    models: dict[str, ModelPrice]
    batch_discount: float = 0.5
    sources: tuple[str, ...] = ()

    @classmethod
    def from_files(cls, *paths: str | Path | None) -> PriceTable:
        """The shipped table, then each of `paths` given (later entries win)."""
        shipped = importlib.resources.files("grader") / "prices.toml"
        data = tomllib.loads(shipped.read_text(encoding="utf-8"))
        models, discount = _parse(data, "grader/prices.toml")
        sources = ["grader/prices.toml"]
        for extra in (p for p in paths if p):
            more, their_discount = _parse(_read(Path(extra)), str(extra))
            models.update(more)
            discount = discount if their_discount is None else their_discount
            sources.append(str(extra))
        return cls(models, discount or 0.5, tuple(sources))

    def price(self, model: str) -> ModelPrice | None:
        """The entry for `model`, or for the name it is a dated snapshot of (`...-2024-07-18`)."""
        if model in self.models:
            return self.models[model]
        match = _SNAPSHOT.fullmatch(model)
        return self.models.get(match.group(1)) if match else None

    def cost(self, model: str, usage: Usage, *, batch: bool = False) -> float | None:
        """USD for `usage` on `model` (None when the model has no price)."""
        price = self.price(model)
        if price is None:
            return None
        cached = min(usage.cached_tokens, usage.prompt_tokens)
        total = (
            (usage.prompt_tokens - cached) * price.input
            + cached * price.cached_input
            + usage.completion_tokens * price.output
        ) / PER_TOKENS
        return total * self.batch_discount if batch else total


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read price table ({exc.strerror})", path=path) from exc
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"not valid TOML: {exc}", path=path) from exc


def _parse(data: dict[str, Any], source: str) -> tuple[dict[str, ModelPrice], float | None]:
    """The models of one price file and its batch discount (None when the file has none)."""
    models: dict[str, ModelPrice] = {}
    for name, entry in (data.get("models") or {}).items():
        try:
            models[name] = ModelPrice(
                input=float(entry["input"]),
                cached_input=float(entry.get("cached_input", entry["input"])),
                output=float(entry["output"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InputError(
                f"price of model {name!r} needs numbers `input` and `output` "
                f"(and optionally `cached_input`), USD per 1M tokens",
                path=source,
            ) from exc
    discount = data.get("batch_discount")
    if discount is None:
        return models, None
    if not isinstance(discount, int | float) or not 0 < discount <= 1:
        raise InputError("`batch_discount` must be a number in (0, 1]", path=source)
    return models, float(discount)


def estimate_tokens(text: str) -> int:
    """About how many tokens `text` is (CHARS_PER_TOKEN characters per token, rounded up)."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def estimate_usage(messages: list[dict[str, str]], max_tokens: int) -> Usage:
    """The dry-run estimate of one request: its messages' tokens and a full reply."""
    prompt = sum(estimate_tokens(m.get("content") or "") + 4 for m in messages)
    return Usage(prompt_tokens=prompt, completion_tokens=max_tokens, cached_tokens=0)


REASON_CHARS = 200
"""A reply's expected reason before any is stored: "one or two sentences", about 50 tokens."""


def expected_reply_tokens(schema: Mapping[str, Any], max_tokens: int) -> int:
    """A reply's expected completion tokens before any is stored: its schema written out."""
    example: dict[str, Any] = {}
    for name, prop in (schema.get("properties") or {}).items():
        if not isinstance(prop, Mapping):
            continue
        if prop.get("enum"):
            example[name] = max(prop["enum"], key=lambda v: len(json.dumps(v)))
        elif prop.get("type") == "string":
            example[name] = "x" * REASON_CHARS
        else:
            example[name] = 0
    text = json.dumps(example) if example else "x" * REASON_CHARS + "\nGrade: 3"
    return max(1, min(max_tokens, estimate_tokens(text)))


NO_PRICE = "no price for the model"
NO_PRICE_LOCAL = "no price: a model served on this machine"
"""Why a cost is unknown: the one wording every command prints."""


def usd_or_unknown(value: float | None) -> str:
    """Dollars for people, or "unknown" when a model has no price (an unknown cost is never $0)."""
    return f"unknown ({NO_PRICE})" if value is None else f"${value:.4f}"


def cost_range(expected: float | None, ceiling: float | None) -> str:
    """An estimated cost for people: expected and ceiling, or unknown without a price."""
    if expected is None or ceiling is None:
        return usd_or_unknown(None)
    return f"${expected:.4f} expected (at most ${ceiling:.4f})"


def spend_short(cost: float, known: bool = True) -> str:
    """Spend for a progress line: `$0.0123`, or `$?` / `$0.0123+?` when a judge is unpriced."""
    if known:
        return f"${cost:.4f}"
    return f"${cost:.4f}+?" if cost else "$?"


def spend_text(cost: float, unpriced: int, *, local: bool = False) -> str:
    """`$0.0123` spent, or what is unknown (never $0); `local`: a model served on this machine."""
    if not unpriced:
        return f"${cost:.4f}"
    known = f"${cost:.4f} + " if cost else ""
    why = NO_PRICE_LOCAL if local else f"{NO_PRICE}; see --prices"
    return f"{known}unknown for {unpriced} request(s) ({why})"
