"""The judge registry: a kind of judge is registered once, by name, with a factory, so a new judge
needs no change to the command line. The built-in `llm` and `lexical` register at the end of this
module, installed packages' through the entry point group `relgrade.judges` on first use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from grader.errors import InputError
from grader.judges.base import Judge
from grader.models import CallRecord, Doc
from grader.plugins import load_entry_points

if TYPE_CHECKING:
    from grader.prompts import PromptSpec

ENTRY_POINTS = "relgrade.judges"


class Endpoint(Protocol):
    """The resolved LLM endpoint of a command (`grader.job.endpoint.Settings` is one)."""

    def model(self, flag: str | None = None) -> str:
        """`flag`, else the default model."""

    def llm_judge(
        self,
        model: str,
        prompt: PromptSpec | str,
        on_call: Callable[[CallRecord], None] | None = None,
    ) -> Judge:
        """An LLM judge of `model` and `prompt` on this endpoint."""


@dataclass(frozen=True, kw_only=True)
class JudgeSettings:
    """Everything a factory may use to build one judge: `--model` (None: not given), `--prompt`,
    the documents, `--judge-config`, the LLM endpoint, `on_call` and every option by name."""

    model: str | None = None
    prompt: PromptSpec | None = None
    docs: Mapping[str, Doc] = field(default_factory=dict)
    config: str | None = None
    endpoint: Endpoint | None = None
    on_call: Callable[[CallRecord], None] | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


MakeJudge = Callable[[JudgeSettings], Judge]


@dataclass(frozen=True)
class JudgeKind:
    """One registered kind of judge (see `register_judge`)."""

    name: str
    factory: MakeJudge
    help: str
    takes_model: bool = False
    needs_all_docs: bool = False
    batch: bool = False


_KINDS: dict[str, JudgeKind] = {}
_loaded = {"plugins": False}


def register_judge(
    name: str,
    factory: MakeJudge,
    *,
    help: str,
    takes_model: bool = False,
    needs_all_docs: bool = False,
    batch: bool = False,
) -> JudgeKind:
    """Register the judge kind `name` (`--judge NAME`): `factory` builds one judge (InputError
    for settings it cannot use); `takes_model`: one judge per `--model`; `needs_all_docs`: it
    reads every document; `batch`: the Batch API can send its judges. A name twice: ValueError."""
    if name in _KINDS:
        raise ValueError(f"a judge named {name!r} is registered already")
    _KINDS[name] = JudgeKind(name, factory, help, takes_model, needs_all_docs, batch)
    return _KINDS[name]


def _load() -> None:
    if not _loaded["plugins"]:
        _loaded["plugins"] = True
        load_entry_points(ENTRY_POINTS)


def judge_kinds(*, batch: bool = False) -> list[JudgeKind]:
    """The registered kinds, in order (`batch`: only those the Batch API can send)."""
    _load()
    return [k for k in _KINDS.values() if k.batch or not batch]


def judge_names(*, batch: bool = False) -> list[str]:
    """The names `--judge` accepts (`batch`: for batch commands)."""
    return [k.name for k in judge_kinds(batch=batch)]


def judge_kind(name: str) -> JudgeKind:
    """The kind registered as `name`; an InputError listing the registered ones otherwise."""
    _load()
    if name not in _KINDS:
        raise InputError(
            f"no judge named {name!r}",
            hint=f"use one of {', '.join(_KINDS)}, or register yours (docs/adding-a-judge.md)",
        )
    return _KINDS[name]


def build_judge(name: str, settings: JudgeSettings) -> Judge:
    """A judge of the kind `name`, made by its factory from `settings`."""
    kind = judge_kind(name)
    if settings.model is not None and not kind.takes_model:
        takers = ", ".join(k.name for k in _KINDS.values() if k.takes_model)
        raise InputError(
            f"--model is for LLM judges: judge {name!r} takes no model",
            hint=f"drop --model or choose a judge that takes one ({takers})",
        )
    return kind.factory(settings)


def build_judges(name: str, settings: JudgeSettings, models: Sequence[str] = ()) -> list[Judge]:
    """The judges of the kind `name`: one per model for a kind that takes models (several make
    an ensemble; none: its default model), else one (`models` must then be empty)."""
    kind = judge_kind(name)
    if not kind.takes_model:
        if models:
            settings = dataclasses.replace(settings, model=models[0])  # refused by build_judge
        return [build_judge(name, settings)]
    wanted: list[str | None] = list(models) or [None]
    return [build_judge(name, dataclasses.replace(settings, model=m)) for m in wanted]


def _llm_judge(settings: JudgeSettings) -> Judge:
    """An LLM judge of `settings.model` (else the endpoint's default) and `settings.prompt`."""
    if settings.endpoint is None or settings.prompt is None:
        raise InputError("the llm judge needs an endpoint and a prompt")
    model = settings.endpoint.model(settings.model)
    return settings.endpoint.llm_judge(model, settings.prompt, on_call=settings.on_call)


def _lexical_judge(settings: JudgeSettings) -> Judge:
    """The lexical judge over `settings.docs` with `settings.config` (imported only when used)."""
    from grader.judges.lexical.config import load_lexical_config
    from grader.judges.lexical.judge import LexicalJudge

    return LexicalJudge(settings.docs, load_lexical_config(settings.config))


register_judge(
    "llm",
    _llm_judge,
    help="an LLM on an OpenAI-compatible server (--model, --prompt)",
    takes_model=True,
    batch=True,
)
register_judge(
    "lexical",
    _lexical_judge,
    help="offline BM25-style baseline (--judge-config: its TOML)",
    needs_all_docs=True,
)
