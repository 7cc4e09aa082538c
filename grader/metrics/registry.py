"""The measure registry: a measure is one `register(...)` call, which says all
the rest of relgrade knows of it; none of `parse_measure`, `evaluate` and the CLI names a measure.
Built-in measures register the first time one is looked up (`MODULES`), installed packages
through the entry points `relgrade.measures` (`grader.plugins`)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import numpy.typing as npt

from grader.plugins import load_entry_points

if TYPE_CHECKING:
    from grader.metrics.judged_rows import Ranked

Kernel = Callable[["Measure", "Ranked"], npt.NDArray[np.float64]]
"""(measure, judged rows of one run) -> one value per qrels query, in `Ranked.query_ids` order."""

ParamParser = Callable[[str], Any]
"""Turns the text of `key=value` into the value (hashable, printed back with `str`); raises
ValueError saying what is wrong."""

Cutoff = Literal["optional", "required", "none"]

Gains = tuple[tuple[int, int], ...]
"""nDCG's custom gains, sorted by grade, identity entries dropped."""

ENTRY_POINTS = "relgrade.measures"

DEFAULT_THRESHOLD = 2
MIN_THRESHOLD = 1
GAINS = ("linear", "exp")


def format_gains(gains: Gains) -> str:
    """The map as ir_measures prints it: `{2:3,3:7}`."""
    return "{" + ",".join(f"{g}:{v}" for g, v in gains) + "}"


@dataclass(frozen=True, order=True)
class Measure:
    """One measure: family name, cutoff k (None = whole ranking), `rel` the binary threshold (None
    for nDCG and Judged), nDCG's `gain` ("linear", "exp") and `gains` map, `judged_only` (score the
    condensed list) and the family's own `params` by key (a None value is not printed)."""

    name: str
    cutoff: int | None = None
    rel: int | None = None
    gain: str | None = None
    gains: Gains = ()
    judged_only: bool = False
    params: tuple[tuple[str, Any], ...] = ()

    def __str__(self) -> str:
        params = []
        if self.rel is not None:
            params.append(f"rel={self.rel}")
        if self.gain == "exp":
            params.append("gain=exp")
        if self.gains:
            params.append(f"gains={format_gains(self.gains)}")
        if self.judged_only:
            params.append("judged_only=True")
        params += [f"{key}={value}" for key, value in self.params if value is not None]
        text = self.name + (f"({','.join(params)})" if params else "")
        return text + (f"@{self.cutoff}" if self.cutoff is not None else "")

    @property
    def threshold(self) -> int:
        """The binary threshold; only for measures that take one."""
        if self.rel is None:
            raise ValueError(f"{self} has no binary threshold")
        return self.rel

    def param(self, key: str) -> Any:
        """The value of one of the family's own parameters (KeyError when it has none)."""
        return dict(self.params)[key]


@dataclass(frozen=True)
class MeasureDef:
    """One registered measure family, as `register` was given it (docs/adding-a-measure.md says
    what each field means); `with_rel`: the family meant with `rel=` (NumRet(rel=N): NumRelRet)."""

    name: str
    compute: Kernel
    usage: str
    help: str
    rel: bool = True
    cutoff: Cutoff = "optional"
    params: Mapping[str, ParamParser] = field(default_factory=dict)
    defaults: Mapping[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    summed: bool = False
    judged_only: bool = False
    gain: bool = False
    trec_eval: str | None = None
    with_rel: str | None = None
    list_function: Callable[..., float] | None = None


_BY_NAME: dict[str, MeasureDef] = {}
_SPELLINGS: dict[str, str] = {}
_TREC_EVAL: dict[str, str] = {}
_loaded = {"builtin": False, "plugins": False}


def register(name: str, compute: Kernel, **fields: Any) -> MeasureDef:
    """Register the measure family `name` (e.g. "P"), the other `MeasureDef` fields given by
    keyword, and return its definition. A name taken twice is a ValueError."""
    for mapping in ("params", "defaults"):  # None as "none", and a copy of the caller's
        fields[mapping] = dict(fields.get(mapping) or {})
    definition = MeasureDef(name, compute, **fields)
    unknown = set(definition.defaults) - set(definition.params)
    if unknown:
        raise ValueError(f"measure {name}: defaults for parameters it does not take: {unknown}")
    spellings = {s.lower() for s in (name, *definition.aliases)}
    taken = sorted(s for s in spellings if s in _SPELLINGS)
    if taken:
        raise ValueError(f"measure {name}: {', '.join(taken)} is registered already")
    _BY_NAME[name] = definition
    _SPELLINGS.update(dict.fromkeys(spellings, name))
    if definition.trec_eval is not None:
        _TREC_EVAL[definition.trec_eval.lower()] = name
    return definition


#: The modules of the measures relgrade ships (`register(...)` calls), in the order `relgrade
#: evaluate --help` lists them.
MODULES = ("ndcg", "binary", "counts")


def _load_builtin() -> None:
    if not _loaded["builtin"]:
        _loaded["builtin"] = True
        for module in MODULES:
            importlib.import_module(f"grader.metrics.{module}")


def find(spelling: str) -> MeasureDef | None:
    """The family a spelling names (case-insensitive), None when no measure has it."""
    _load_builtin()
    name = _SPELLINGS.get(spelling.lower())
    if name is None and not _loaded["plugins"]:
        _loaded["plugins"] = True
        load_entry_points(ENTRY_POINTS)  # slow to scan: only when a name is not built in
        name = _SPELLINGS.get(spelling.lower())
    return _BY_NAME[name] if name is not None else None


def get(name: str) -> MeasureDef:
    """The family of a canonical name (as `Measure.name` holds it)."""
    _load_builtin()
    return _BY_NAME[name]


def trec_eval_family(name: str) -> str | None:
    """The family of trec_eval's name with a cutoff (`ndcg_cut`, `P`, `recall` ...)."""
    _load_builtin()
    return _TREC_EVAL.get(name.lower())


def registered() -> list[MeasureDef]:
    """Every registered family: the built-in ones in `MODULES` order, then the others in the
    order they registered."""
    _load_builtin()
    order = {f"grader.metrics.{module}": i for i, module in enumerate(MODULES)}
    return sorted(_BY_NAME.values(), key=lambda d: order.get(d.compute.__module__, len(order)))


def help_lines() -> str:
    """The measures' lines of `relgrade evaluate --help`: usage, then help, aligned."""
    lines = []
    for definition in registered():
        first, *rest = definition.help.splitlines() or [""]
        if len(definition.usage) > 17:  # a long usage gets a line of its own
            lines.append(f"  {definition.usage}")
            rest = [first, *rest]
        else:
            lines.append(f"  {definition.usage:<17} {first}".rstrip())
        lines += [f"{'':20}{line}" for line in rest]
    return "\n".join(lines)
