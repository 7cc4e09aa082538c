"""Measures that look deeper than the labels, and runs whose document ids the qrels do not know.

An unjudged result counts as not relevant, so where labels stop above a measure's depth its
number rests on that: above `UNJUDGED_SHARE` unjudged there (`judged_share`) it gets a caution. A
run whose top 10 is almost never judged (`MISMATCH_JUDGED`) most likely names other ids."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from grader.metrics.evaluate import exact_mean
from grader.metrics.judged_at_k import judged_of_returned
from grader.metrics.judged_rows import Ranked
from grader.metrics.measures import Measure

UNJUDGED_SHARE = 0.10
MISMATCH_JUDGED = 0.05
MISMATCH_K = 10

_JUDGED_ONLY_READERS = frozenset({"Judged", "NumRet", "NumRel", "Bpref"})
"""Families that do not read an unjudged result as not relevant."""


@dataclass(frozen=True)
class DeepMeasure:
    """A measure of one run that looks where more than `UNJUDGED_SHARE` is unjudged."""

    measure: str
    label: str
    judged_share: float


def judged_share(ranked: Ranked, k: int | None) -> float:
    """The share of the results within the top k (the whole ranking when None) that are
    judged, per query over min(k, returned), averaged over the answered queries (NaN: none)."""
    answered = ranked.returned > 0
    return exact_mean(judged_of_returned(ranked, k)[answered]) if answered.any() else math.nan


def depth_label(ranked: Ranked, k: int | None) -> str:
    """`Judged@k`; for the whole ranking `Judged@n` when every answered query returns n results,
    else `Judged (whole ranking)`."""
    if k is not None:
        return f"Judged@{k}"
    lengths = set(ranked.returned[ranked.returned > 0].tolist())
    return f"Judged@{lengths.pop()}" if len(lengths) == 1 else "Judged (whole ranking)"


def too_deep(ranked: Ranked, measures: Sequence[Measure]) -> list[DeepMeasure]:
    """The measures whose depth holds more than `UNJUDGED_SHARE` unjudged results."""
    shares: dict[int | None, float] = {}
    deep = []
    for measure in measures:
        if measure.name in _JUDGED_ONLY_READERS or measure.judged_only:
            continue
        if measure.cutoff not in shares:
            shares[measure.cutoff] = judged_share(ranked, measure.cutoff)
        share = shares[measure.cutoff]
        if not math.isnan(share) and 1.0 - share > UNJUDGED_SHARE + 1e-12:
            deep.append(DeepMeasure(str(measure), depth_label(ranked, measure.cutoff), share))
    return deep


def caution_line(run: str, deep: Sequence[DeepMeasure]) -> str:
    """One caution naming each deep measure of `run` with the Judged share at its depth."""
    by_depth: dict[tuple[str, float], list[str]] = {}
    for d in deep:
        by_depth.setdefault((d.label, d.judged_share), []).append(d.measure)
    parts = "; ".join(
        f"{', '.join(names)} where {label} = {share:.4f}"
        for (label, share), names in by_depth.items()
    )
    return (
        f"caution: run {run}: {parts}: more than {UNJUDGED_SHARE:.0%} unjudged at the depth "
        "these measures look at; unjudged results count as not relevant and recall's and AP's "
        "denominators know only the judged relevant documents, so the score may be far from "
        "what complete labels give, above or below (`judged_share` in JSON)"
    )


def mismatch_warning(run: str, ranked: Ranked, depth: int | None) -> str | None:
    """A warning when almost none of the run's top 10 is judged on the queries it shares with
    the qrels (Judged@10 below `MISMATCH_JUDGED`); None otherwise or when it shares none."""
    k = MISMATCH_K if depth is None else min(MISMATCH_K, depth)
    share = judged_share(ranked, k)
    if math.isnan(share) or share >= MISMATCH_JUDGED:
        return None
    shared = int((ranked.returned > 0).sum())
    queries = "query" if shared == 1 else "queries"
    ids = (
        "(MS MARCO v1 vs v2 ids? ids read as numbers, 0012 as 12?)"
        if len(ranked.rank) == 0
        else "(or do the qrels judge very few documents per query?)"
    )
    found = (
        "none of its document ids is" if len(ranked.rank) == 0 else f"almost none of its top {k} is"
    )
    return (
        f"warning: run {run}: {found} in the qrels on the {shared} {queries} they share "
        f"(Judged@{k} = {share:.4f}), so every measure is near 0: are the run and the qrels "
        f"from the same collection, with the same document ids {ids}"
    )
