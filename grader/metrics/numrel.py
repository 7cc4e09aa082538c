"""NumRel(rel=N): the documents judged relevant for the query (trec_eval's num_rel), returned or
not: the denominator of recall, AP and Rprec; a count, summed in the "all" row."""

from __future__ import annotations

from grader.metrics._lists import hits
from grader.metrics.judged_rows import Float, Ranked
from grader.metrics.measures import DEFAULT_THRESHOLD, Measure
from grader.metrics.registry import register


def num_rel(judged: list[int], threshold: int = DEFAULT_THRESHOLD) -> int:
    """How many of the query's judged grades reach the threshold."""
    return hits(judged, threshold)


def compute(measure: Measure, ranked: Ranked) -> Float:
    """NumRel per qrels query (vectorised)."""
    return ranked.n_relevant(measure.threshold)


register(
    "NumRel",
    compute,
    usage="NumRel(rel=N)",
    help="relevant judged documents of the query (a count, SUMMED likewise)",
    cutoff="none",
    aliases=("num_rel",),
    summed=True,
    list_function=num_rel,
)
