"""Measure names, parsed into `Measure` values that print back to the same string. Names follow
ir_measures (`nDCG@10`, `RR(rel=3)@10`, `nDCG(gain=exp)@10`); the binary threshold is always
printed: a number never travels without the threshold that produced it, and binary qrels never
score a silent 0 (`resolve_thresholds`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from grader.errors import InputError
from grader.metrics import foreign, registry
from grader.metrics.registry import DEFAULT_THRESHOLD as DEFAULT_THRESHOLD
from grader.metrics.registry import GAINS, MIN_THRESHOLD, Gains
from grader.metrics.registry import Measure as Measure

_NAME_RE = re.compile(r"^\s*([A-Za-z_]+)\s*(?:\(([^)]*)\))?\s*(?:@\s*(\S+))?\s*$")
DCG_GAINS = {"log2": "linear", "exp-log2": "exp"}
_INT = re.compile(r"^[+-]?\d+$")


def unquote(value: str) -> str:
    """A word with or without matching single or double quotes."""
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def parse_dcg(value: str) -> str:
    """`log2` -> "linear", `exp-log2` -> "exp" (relgrade's gain names)."""
    word = unquote(value)
    if word not in DCG_GAINS:
        raise ValueError(f"unknown dcg {value!r}; use dcg='log2' or dcg='exp-log2'")
    return DCG_GAINS[word]


def parse_flag(value: str) -> bool:
    """`True` / `False` (ir_measures' spelling; lower case accepted too)."""
    word = unquote(value).lower()
    if word not in ("true", "false"):
        raise ValueError(f"{value!r} is not True or False")
    return word == "true"


def parse_gains(value: str) -> Gains:
    """`{0:0,1:1,2:3,3:7}` -> ((2, 3), (3, 7)): sorted by grade, identity entries dropped."""
    text = value.strip()
    if not (text.startswith("{") and text.endswith("}")):
        raise ValueError(f"gains={value} must be a map in braces, e.g. gains={{0:0,1:1,2:3,3:7}}")
    mapping: dict[int, int] = {}
    for item in (p.strip() for p in text[1:-1].split(",")):
        if not item:
            continue
        grade, sep, gain = (s.strip() for s in item.partition(":"))
        if not sep or not _INT.match(grade) or not _INT.match(gain):
            raise ValueError(f"gains entry {item!r} must be grade:gain, two integers")
        if int(grade) < 0:
            raise ValueError(f"gains names grade {grade}; negative grades always gain 0")
        if int(grade) in mapping:
            raise ValueError(f"gains names grade {int(grade)} twice")
        if int(gain) < 0:
            raise ValueError(
                f"gain {gain} for grade {grade} is negative; trec_eval (which ir_measures runs "
                "for custom gains) reads a negative qrels value as unjudged, so use gains >= 0"
            )
        mapping[int(grade)] = int(gain)
    return tuple((g, v) for g, v in sorted(mapping.items()) if g != v)


def measure_help() -> str:
    """The hint an unknown or malformed name gets: every registered way to write a measure."""
    known = registry.registered()
    usages = ", ".join(d.usage for d in known)
    required = ", ".join(d.name for d in known if d.cutoff == "required")
    condensed = ", ".join(d.name for d in known if d.judged_only)
    return (
        f"{usages}; the @k part is optional except for {required}; ir_measures' "
        "nDCG(dcg='exp-log2'), nDCG(gains={0:0,1:1,2:3,3:7}) and judged_only=True "
        f"(on {condensed}) are accepted"
    )


def is_summed(measure: str | Measure) -> bool:
    """Whether a measure's "all" row is the sum over queries (a count), not the mean."""
    return registry.get(parse_measure(measure).name).summed


def _bad(name: str, why: str, hint: str | None = None) -> InputError:
    return InputError(f"measure {name!r}: {why}", hint=hint or measure_help())


def parse_measure(
    name: str | Measure | Any,
    *,
    default_rel: int = DEFAULT_THRESHOLD,
    trec_eval_level: int = foreign.TREC_EVAL_LEVEL,
) -> Measure:
    """Parse `nDCG@10`, `RR(rel=3)@10`, `P_10` (trec_eval's, at `trec_eval_level`), an ir_measures
    object ... into a Measure; a name without `(rel=N)` gets `default_rel`. InputError lists the
    valid names."""
    if isinstance(name, Measure):
        return name
    if not isinstance(name, str):  # an ir_measures object: the Measure ir_measures computes
        is_ir = foreign.is_ir_measures(name)
        spelled = foreign.ir_measures_spelling(name) if is_ir else None
        if spelled is None:
            raise InputError(
                f"measure {name!s}: relgrade cannot compute it"
                + (" (an ir_measures measure)" if is_ir else ""),
                hint=f"give a name or an ir_measures measure among: {measure_help()}",
            )
        try:
            return _parse(spelled, DEFAULT_THRESHOLD)
        except InputError as error:
            raise InputError(
                f"ir_measures measure {name!s}: relgrade cannot compute it ({error.reason})",
                hint=error.hint,
            ) from None
    if trec_eval_level < MIN_THRESHOLD:
        raise InputError(
            f"trec_eval level {trec_eval_level}: relgrade's thresholds start at 1",
            hint="a grade >= N is relevant; use a level of 1 or more",
        )
    trec = foreign.trec_eval_spelling(name, trec_eval_level)
    return _parse(trec if trec is not None else name, default_rel)


def _parse(name: str, default_rel: int) -> Measure:
    """Parse one of relgrade's own names."""
    match = _NAME_RE.match(name)
    if not match:
        raise _bad(name, "not a measure name")
    family_text, params_text, cutoff_text = match.groups()
    found = registry.find(family_text)
    if found is None:
        raise _bad(name, f"unknown measure {family_text!r}")
    texts = [p.strip() for p in re.split(r",(?![^{]*\})", params_text or "") if p.strip()]
    parts = [(p, *(s.strip() for s in p.partition("="))) for p in texts]  # commas outside {}
    if found.with_rel and any(key == "rel" for _, key, _, _ in parts):
        # ir_measures' NumRet(rel=N) is trec_eval's num_rel_ret
        found = registry.get(found.with_rel)
    cutoff = _cutoff(name, found, cutoff_text)
    given: dict[str, Any] = {"rel": default_rel if found.rel else None}
    given["gain"] = "linear" if found.gain else None
    own = dict(found.defaults)
    for part, key, sep, value in parts:
        if not sep:
            raise _bad(name, f"parameter {part!r} must be key=value")
        if key in ("rel", "gain", "dcg", "gains", "judged_only"):
            given.update(_common(name, found, key, value))
        elif key in found.params:
            try:
                own[key] = found.params[key](value)
            except ValueError as error:
                raise _bad(name, f"{key}={value}: {error}") from None
        else:
            raise _bad(
                name,
                f"unknown parameter {key!r}",
                "parameters are rel=N, gain=exp (or dcg='exp-log2'), gains={grade:gain,...} "
                "and judged_only=True" + "".join(f", {k}=..." for k in found.params),
            )
    if given.get("gains") and given["gain"] == "exp":
        raise _bad(name, "exponential gain and a gains map contradict", "give one of them")
    needed = sorted(set(found.params) - set(own))
    if needed:
        raise _bad(name, f"{found.name} needs {', '.join(k + '=' for k in needed)}")
    return Measure(found.name, cutoff, params=tuple(sorted(own.items())), **given)


def _cutoff(name: str, found: registry.MeasureDef, text: str | None) -> int | None:
    """The `@k` of a name, checked against what the family takes."""
    if text is None:
        if found.cutoff == "required":
            raise _bad(name, f"{found.name} needs a cutoff, e.g. {found.name}@10")
        return None
    if found.cutoff == "none":
        raise _bad(name, f"{found.name} takes no @k cutoff")
    if not text.isdigit() or int(text) < 1:
        raise _bad(name, f"the cutoff {text!r} must be a positive integer")
    return int(text)


def _common(name: str, found: registry.MeasureDef, key: str, value: str) -> dict[str, Any]:
    """The Measure field one of `rel=`, `gain=` and ir_measures' `dcg=`, `gains=`, `judged_only=`
    sets, checked against what the family takes."""
    family = found.name
    if key == "rel" and not found.rel:
        why = "nDCG uses the grades as gains and Judged counts any grade"
        raise _bad(name, f"{family} takes no threshold", why)
    if key == "rel" and (not value.isdigit() or int(value) < MIN_THRESHOLD):
        why = "use a whole number from 1 up: rel=2 for 0..3 grades, rel=1 for binary qrels"
        raise _bad(name, f"rel={value} is not a grade threshold", why)
    if key == "judged_only" and not found.judged_only:
        takers = sorted(d.name for d in registry.registered() if d.judged_only)
        why = "judged_only=True is for " + ", ".join(takers)
        raise _bad(name, f"{family} takes no judged_only", why)
    if key in ("gain", "dcg", "gains") and not found.gain:
        hint = None if key == "gain" else f"{key}= is for nDCG"
        raise _bad(name, f"{family} takes no {key}", hint)
    if key == "gain" and value not in GAINS:
        raise _bad(name, f"unknown gain {value!r}", "use gain=linear or gain=exp")
    read: dict[str, Callable[[str], Any]] = {"rel": int, "gain": str}
    read["judged_only"] = parse_flag
    read.update(dcg=parse_dcg, gains=parse_gains)
    try:
        return {"gain" if key == "dcg" else key: read[key](value)}
    except ValueError as error:
        raise _bad(name, str(error)) from None


def parse_measures(names: list[Any] | tuple[Any, ...]) -> list[Measure]:
    """Parse several names, dropping repeats while keeping the given order."""
    seen: dict[Measure, None] = {}
    for name in names:
        seen.setdefault(parse_measure(name), None)
    return list(seen)


#: Without a threshold written, so that `evaluate` gives them the one the qrels call for.
DEFAULT_MEASURES: tuple[str, ...] = (
    "nDCG@10",
    "RR@10",
    "P@10",
    "R@100",
    "AP",
    "Judged@10",
)

BINARY_THRESHOLD = 1


def default_threshold(max_grade: int | None) -> int:
    """The threshold a name without `(rel=N)` gets: 1 for binary qrels (highest grade <= 1: MS
    MARCO, BEIR), where 2 would leave no query a relevant document; else DEFAULT_THRESHOLD."""
    if max_grade is not None and max_grade <= BINARY_THRESHOLD:
        return BINARY_THRESHOLD
    return DEFAULT_THRESHOLD


def uses_default_threshold(name: str | Measure) -> bool:
    """Whether a name takes a threshold but does not write one (`RR@10`, `P_10`, `map`)."""
    if isinstance(name, Measure):
        return False
    return parse_measure(name, default_rel=BINARY_THRESHOLD) != parse_measure(
        name, default_rel=DEFAULT_THRESHOLD
    )


def resolve_thresholds(
    names: Sequence[str | Measure | Any],
    top: int | None,
    *,
    typed: bool,
    trec_eval_level: int = foreign.TREC_EVAL_LEVEL,
) -> tuple[list[Measure], list[str]]:
    """The measures with the threshold the qrels call for where a name writes none, and the lines
    saying what was decided (the inferred 1, a threshold above every grade, and for `typed` names
    the 2 ir_measures reads as 1); other tools' names keep their tool's (`foreign`)."""
    default = default_threshold(top)
    measures = list(
        dict.fromkeys(
            parse_measure(n, default_rel=default, trec_eval_level=trec_eval_level) for n in names
        )
    )
    bare = [n for n in names if isinstance(n, str) and uses_default_threshold(n)]
    lines = []
    if bare and default == BINARY_THRESHOLD:
        shown = str(parse_measure(bare[0], default_rel=default))
        lines.append(
            f"binary qrels (highest grade {top}): measures without (rel=N) use "
            f"rel={default}, e.g. {shown}"
        )
    elif bare and typed:
        lines.append(
            f"{', '.join(bare)}: rel={default} here (graded qrels); ir_measures and trec_eval "
            "read a name without (rel=N) as rel=1 (write (rel=1) for their numbers)"
        )
    above = [str(m) for m in measures if m.rel is not None and top is not None and m.rel > top]
    if above:
        verb = "it scores" if len(above) == 1 else "they score"
        lines.append(
            f"no qrels grade reaches the threshold of {', '.join(above)} (highest grade {top}): "
            f"no query has a relevant document, so {verb} 0"
        )
    return measures, lines


def is_foreign(name: object) -> bool:
    """Whether a name is another tool's: a trec_eval name or an ir_measures measure object."""
    if isinstance(name, str):
        return foreign.trec_eval_spelling(name) is not None
    return foreign.is_ir_measures(name)


def requested_names(
    names: Sequence[str | Measure | Any],
    top: int | None,
    trec_eval_level: int = foreign.TREC_EVAL_LEVEL,
) -> list[str] | None:
    """The name each measure was asked by, as typed, in the measures' order; None when no name is
    another tool's."""
    if not any(is_foreign(n) for n in names):
        return None
    default = default_threshold(top)
    typed: dict[Measure, str] = {}
    for name in names:
        measure = parse_measure(name, default_rel=default, trec_eval_level=trec_eval_level)
        typed.setdefault(measure, str(name))
    return list(typed.values())


def foreign_lines(
    names: Sequence[str | Measure | Any], trec_eval_level: int = foreign.TREC_EVAL_LEVEL
) -> list[str]:
    """What other tools' names were computed as: `P_10 = P(rel=1)@10` (trec_eval's, at its
    level) and `P@10 = P(rel=1)@10` (ir_measures' objects); a level given to no trec_eval name."""
    trec = [n for n in names if isinstance(n, str) and is_foreign(n)]
    objects = [n for n in names if not isinstance(n, str | Measure) and is_foreign(n)]
    lines = []
    if trec:
        pairs = ", ".join(
            f"{n} = {parse_measure(n, trec_eval_level=trec_eval_level)}" for n in trec
        )
        lines.append(
            f"trec_eval's names as trec_eval computes them (relevance level {trec_eval_level}, "
            f"trec_eval -l {trec_eval_level}): {pairs}"
        )
    elif trec_eval_level != foreign.TREC_EVAL_LEVEL:
        lines.append(
            f"trec_eval level {trec_eval_level} applies to trec_eval's names only (P_10, map, "
            "ndcg_cut_10 ...): none was given"
        )
    if objects:
        pairs = ", ".join(f"{n} = {parse_measure(n)}" for n in objects)
        lines.append(f"ir_measures' measures as ir_measures computes them: {pairs}")
    return lines
