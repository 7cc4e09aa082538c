"""Whether the filled score's interval may be given, per run and measure, and why not: the
correction learns the LLM's errors from the overlap, valid where it resembles the holes. On the
run's top k, the overlap of the holes' and the overlap pairs' distributions over cells (rank band
x LLM grade) must reach `MIN_REACH` with `MIN_SLOTS` overlap slots (bench/fill_coverage.py), and
at most `MAX_UNJUDGED` of the slots may be graded by nobody."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from grader.evaluation.fill.interval import Overlap
from grader.metrics.judged_rows import Int, Ranked
from grader.metrics.measures import Measure

BANDS = np.array([3, 6, 10, 30, 100])  # rank bands: 1-3, 4-6, 7-10, 11-30, 31-100, 101+
HIGH = 2  # LLM grades 0-1 and 2-3 (the 0..3 scale, before --llm-scale): two cells per band
MIN_REACH = 0.5
MIN_SLOTS = 5
MAX_UNJUDGED = 0.01


@dataclass(frozen=True)
class Reach:
    """Of a run's top `k` (None: the whole ranking): slots of holes, of overlap pairs, of
    results nobody graded, all slots, and the share of hole slots resembling overlap slots."""

    k: int | None
    holes: int
    overlap: int
    unjudged: int
    slots: int
    share: float

    def reason(self, run: str, design: str = "judged") -> str | None:
        """Why the interval at this depth is not given, or None; a sample of the holes (`design`
        "holes") reaches them by design, so only the share nobody graded is checked."""
        top = "ranking" if self.k is None else f"top {self.k}"
        if self.slots and self.unjudged / self.slots > MAX_UNJUDGED:
            return (
                f"{self.unjudged / self.slots:.0%} of {run}'s {top} nobody graded (people or the "
                "LLM): the interval cannot say what people would grade them; grade them too "
                "(grade --depth), or use a measure with a cutoff the grades reach"
            )
        if not self.holes or design == "holes":
            return None
        where = f"{self.holes:,} hole slots of {run}'s {top}"
        fix = (
            "; have people grade a random sample of the holes (relgrade sample on the LLM's "
            "grades of the holes, annotate, then evaluate --fill with that sample's manifest "
            "as --fill-manifest)"
        )
        if self.overlap < MIN_SLOTS:
            return (
                f"only {self.overlap} pair(s) graded by both people and the LLM lie among the "
                f"{where} (it takes {MIN_SLOTS}): the overlap does not reach where the holes "
                f"are{fix}"
            )
        if self.share < MIN_REACH:
            return (
                f"the pairs graded by both do not resemble the holes: {self.share:.0%} of the "
                f"{where} resemble them by rank and LLM grade (it takes {MIN_REACH:.0%}){fix}"
            )
        return None


def reach(ranked: Ranked, k: int | None, first: int, overlap: Int, llm: Int) -> Reach:
    """The `Reach` of a run coded by pair index (holes from `first` on), `overlap` the overlap
    pairs, `llm` every pair's LLM grade (-1: none)."""
    top = np.ones(len(ranked.rank), dtype=bool) if k is None else ranked.rank <= k
    index = ranked.grade[top]
    grade = np.where(llm[index] < 0, 0, np.where(llm[index] >= HIGH, 2, 1))
    cells = np.searchsorted(BANDS, ranked.rank[top], side="left") * 3 + grade
    is_hole = index >= first
    is_overlap = np.isin(index, overlap)
    slots = int(ranked.returned.sum() if k is None else np.minimum(ranked.returned, k).sum())
    unjudged = max(slots - int(top.sum()), 0)
    holes, both = cells[is_hole], cells[is_overlap]
    share = 0.0
    if len(holes) and len(both):
        size = int(max(holes.max(), both.max())) + 1
        p_holes = np.bincount(holes, minlength=size) / len(holes)
        p_both = np.bincount(both, minlength=size) / len(both)
        share = float(np.minimum(p_holes, p_both).sum())
    return Reach(k, len(holes), len(both), unjudged, slots, share)


def refusals(
    coded: Mapping[str, Ranked], measures: Sequence[Measure], overlap: Overlap, design: str
) -> dict[str, dict[str, str]]:
    """run -> measure -> why it gets no interval, one `reach` per run and cutoff."""
    raw_of = np.full(len(overlap.grades), -1, dtype=np.int64)  # the LLM's own grade of a pair
    raw_of[overlap.first :] = overlap.hole_raw
    raw_of[overlap.pairs] = overlap.pair_raw
    out: dict[str, dict[str, str]] = {}
    for run, ranked in coded.items():
        found: dict[int | None, Reach] = {}
        for measure in measures:
            k = measure.cutoff
            if k not in found:
                found[k] = reach(ranked, k, overlap.first, overlap.pairs, raw_of)
            why = found[k].reason(run, design)
            if why is not None:
                out.setdefault(run, {})[str(measure)] = why
    return out
