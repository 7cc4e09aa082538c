"""Which binary threshold a measure name without `(rel=N)` gets, and what is said about it.

One rule for `relgrade evaluate`, `grader.metrics.evaluate` and `relgrade.evaluate`: the threshold
comes from the qrels' highest grade (`default_threshold`: 1 for binary qrels, else 2), and the
decision is said in words (the command prints them on stderr, the library warns with them), so
binary qrels never score a silent 0.
"""

from __future__ import annotations

from collections.abc import Sequence

from grader.metrics.measures import (
    BINARY_THRESHOLD,
    Measure,
    default_threshold,
    parse_measure,
    uses_default_threshold,
)


def resolve_thresholds(
    names: Sequence[str | Measure], top: int | None, *, typed: bool
) -> tuple[list[Measure], list[str]]:
    """The measures with the threshold qrels whose highest grade is `top` call for where a name
    writes none (1 for binary qrels, else 2), and the lines that say what was decided: the
    inferred 1, a threshold above every grade, and (for `typed` names, those a person wrote)
    the 2 that ir_measures reads as 1. Measure objects keep their threshold."""
    default = default_threshold(top)
    measures = list(dict.fromkeys(parse_measure(n, default_rel=default) for n in names))
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
