"""Which binary threshold a measure name without `(rel=N)` gets (`default_threshold` of the qrels'
highest grade), and the words that say so: binary qrels never score a silent 0."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grader.metrics import foreign
from grader.metrics.measures import (
    BINARY_THRESHOLD,
    Measure,
    default_threshold,
    parse_measure,
    uses_default_threshold,
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
