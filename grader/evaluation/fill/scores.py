"""Each run scored three ways on top of people's labels (docs/filling-holes.md):
`holes_nonrelevant` (people's qrels alone), `judged_only` (condensed lists) and `filled` (the
LLM's grades, mapped by `scale`, on the holes), all over people's queries; `Shares` says who
judged each run's top k; `Reach` whether the overlap reaches the holes, so the filled score's
interval may be given. Pure: DataFrames in, DataFrames out."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from grader.errors import InputError
from grader.evaluation.fill.interval import (
    Interval,
    Overlap,
    corrected_differences,
    corrected_interval,
    note,
)
from grader.metrics import registry
from grader.metrics.evaluate import Missing, Scores, depth_needed, score
from grader.metrics.judged_rows import Int, Ranked
from grader.metrics.measures import Measure, parse_measure

if TYPE_CHECKING:
    import pandas as pd

    from grader.metrics.rank_order import Precision

Design = Literal["judged", "holes"]

REGIMES = ("holes_nonrelevant", "judged_only", "filled")
SOURCES = ("human", "llm", "unjudged")


@dataclass(frozen=True)
class Shares:
    """Of a run's top `k` results over the qrels queries: counts by source."""

    k: int | None
    human: int
    llm: int
    unjudged: int

    def share(self, source: str) -> float:
        total = self.human + self.llm + self.unjudged
        return getattr(self, source) / total if total else float("nan")


@dataclass
class FillResult:
    """Per run: the Scores of each regime, the shares, and the filled score's interval."""

    measures: list[str]
    scores: dict[str, dict[str, Scores]] = field(default_factory=dict)  # run -> regime -> ...
    shares: dict[str, Shares] = field(default_factory=dict)
    intervals: dict[str, dict[str, Interval]] = field(default_factory=dict)  # run -> measure
    interval_note: str | None = None
    refused: dict[str, dict[str, str]] = field(default_factory=dict)  # run -> measure -> why
    design: Design = "judged"  # where the pairs graded by both were drawn (see evaluate_fill)
    baseline: str | None = None
    differences: dict[str, dict[str, Interval]] = field(default_factory=dict)  # run - baseline
    holes: int = 0  # LLM-graded pairs people did not judge (filled)
    overlap: int = 0  # pairs graded by both (also-judged)
    queries: int = 0  # people's queries: every regime averages over these
    outside: int = 0  # LLM grades on queries people did not judge (left out)
    outside_queries: int = 0  # those queries

    def rows(self, per_query: bool = False) -> list[dict[str, Any]]:
        """[run, query_id, measure, regime, value] ("all": the mean, counts summed), with
        `corrected, ci_low, ci_high` on the filled means with an interval, `reason` on those
        refused."""
        rows = []
        for run, regime in itertools.product(self.scores, REGIMES):
            scores = self.scores[run][regime]
            for (name, mean), values in zip(scores.means(), scores.values.tolist(), strict=True):
                queries = zip(scores.query_ids, values, strict=True) if per_query else ()
                for qid, value in [*queries, ("all", mean)]:
                    row = {"run": run, "query_id": qid, "measure": name, "regime": regime}
                    rows.append({**row, "value": value})
        for row in rows:
            if row["regime"] == "filled" and row["query_id"] == "all":
                found = self.intervals.get(row["run"], {}).get(row["measure"])
                if found is not None:
                    row.update(corrected=found.estimate, ci_low=found.low, ci_high=found.high)
                why = self.refused.get(row["run"], {}).get(row["measure"])
                if why is not None:
                    row["reason"] = why
        return rows

    def frame(self, per_query: bool = False) -> pd.DataFrame:
        """`rows` as a frame."""
        import pandas as pd

        return pd.DataFrame(self.rows(per_query))

    def shares_frame(self) -> pd.DataFrame:
        """[run, k, source, share]: who graded each run's top k (k None: the whole ranking)."""
        import pandas as pd

        rows = [
            {"run": run, "k": s.k, "source": source, "share": s.share(source)}
            for run, s in self.shares.items()
            for source in SOURCES
        ]
        return pd.DataFrame(rows, columns=["run", "k", "source", "share"])


def merge(
    human: pd.DataFrame, llm: pd.DataFrame, scale: Mapping[int, int] | None = None
) -> pd.DataFrame:
    """People's qrels plus the LLM's (mapped) grade of every pair they did not judge."""
    import pandas as pd

    holes = _holes(human, llm)
    grades = holes["grade"].astype("int64")
    if scale is not None:
        grades = grades.map(dict(scale)).astype("int64")
    filled = holes[["query_id", "doc_id"]].assign(grade=grades)
    merged = pd.concat([human[["query_id", "doc_id", "grade"]], filled], ignore_index=True)
    return merged.astype({"query_id": str, "doc_id": str, "grade": "int64"})


def _keys(frame: pd.DataFrame) -> pd.Series:
    return frame["query_id"].astype(str) + "\x00" + frame["doc_id"].astype(str)


def _holes(human: pd.DataFrame, llm: pd.DataFrame) -> pd.DataFrame:
    """The LLM's rows whose pair people did not judge."""
    return llm[~_keys(llm).isin(set(_keys(human)))].reset_index(drop=True)


def overlap_pairs(human: pd.DataFrame, llm: pd.DataFrame) -> pd.DataFrame:
    """Pairs graded by both: [query_id, doc_id, human, llm]."""
    left = human[["query_id", "doc_id", "grade"]].astype({"query_id": str, "doc_id": str})
    right = llm[["query_id", "doc_id", "grade"]].astype({"query_id": str, "doc_id": str})
    both = left.merge(right, on=["query_id", "doc_id"], suffixes=("_human", "_llm"))
    return both.rename(columns={"grade_human": "human", "grade_llm": "llm"})


def evaluate_fill(
    human: pd.DataFrame,
    llm: pd.DataFrame,
    runs: Mapping[str, pd.DataFrame],
    measures: Sequence[str | Measure],
    *,
    scale: Mapping[int, int] | None = None,
    missing: Missing = "zero",
    precision: Precision = "float32",
    weights: Mapping[tuple[str, str], float] | None = None,
    level: float | None = 0.95,
    seed: int = 0,
    design: Design = "judged",
    check: bool = True,
    baseline: str | None = None,
) -> FillResult:
    """Score every run under the three regimes (module docstring; docs/filling-holes.md).

    `weights`: 1/pi of each also-judged pair; `level` None: no interval; `design`: the overlap
    drawn from the judged pool ("judged") or a sample of the holes ("holes"); `check` False keeps
    the intervals `refusals` refuses; `baseline`: the corrected differences from that run."""
    from grader.metrics.join_arrow import join

    parsed = [parse_measure(m) for m in measures]
    if baseline is not None and baseline not in runs:
        raise InputError(
            f"the baseline {baseline!r} is none of the runs", hint=f"one of {', '.join(runs)}"
        )
    people = set(human["query_id"].astype(str))
    inside = llm["query_id"].astype(str).isin(people).to_numpy()
    outside, llm = llm[~inside], llm[inside].reset_index(drop=True)
    merged = merge(human, llm, scale)
    coded = merged.assign(grade=np.arange(len(merged), dtype=np.int64))
    result = FillResult([str(m) for m in parsed], holes=len(merged) - len(human), design=design)
    result.queries, result.outside = len(people), len(outside)
    result.outside_queries = outside["query_id"].nunique()
    depth = depth_needed(parsed)
    ranked_coded = {}
    for name, run in runs.items():
        result.scores[name] = _regimes(human, merged, run, parsed, precision, depth, missing)
        ranked_coded[name] = found = join(coded, run, precision=precision, depth=depth)
        human_rows = int((found.grade < len(human)).sum())  # coded: people's pairs come first
        unjudged = int(found.returned.sum()) - len(found.grade)
        result.shares[name] = Shares(depth, human_rows, len(found.grade) - human_rows, unjudged)
    both = overlap_pairs(human, llm)
    if design == "holes" and weights is not None:
        both = both[[k in weights for k in zip(both["query_id"], both["doc_id"], strict=True)]]
    result.overlap = len(both)
    if len(both) > 1 and level is not None:
        some = next(iter(ranked_coded.values()))
        overlap = _overlap(merged, _holes(human, llm), both, scale, weights, some)
        _intervals(result, ranked_coded, parsed, overlap, missing, level, seed, check, baseline)
    return result


def _regimes(
    human: pd.DataFrame,
    merged: pd.DataFrame,
    run: pd.DataFrame,
    parsed: list[Measure],
    precision: Precision,
    depth: int | None,
    missing: Missing,
) -> dict[str, Scores]:
    """One run's scores under the three regimes."""
    from grader.metrics.join_arrow import join

    # judged_only: the condensed form where the family has one
    condensed = [
        dataclasses.replace(m, judged_only=registry.get(m.name).judged_only) for m in parsed
    ]
    plain = score(join(human, run, precision=precision, depth=depth), parsed, missing=missing)
    cond = score(join(human, run, precision=precision), condensed, missing=missing)
    filled = score(join(merged, run, precision=precision, depth=depth), parsed, missing=missing)
    cond = dataclasses.replace(cond, measures=[str(m) for m in parsed])
    return {"holes_nonrelevant": plain, "judged_only": cond, "filled": filled}


def _overlap(
    merged: pd.DataFrame,
    holes: pd.DataFrame,
    both: pd.DataFrame,
    scale: Mapping[int, int] | None,
    weights: Mapping[tuple[str, str], float] | None,
    ranked: Ranked,
) -> Overlap:
    """The pairs graded by both, coded by index in `merged` (`ranked`: a run joined with it), with
    their 1/pi (1 without a manifest; a pair the manifest lacks has no known inclusion chance)."""
    keys = list(zip(both["query_id"].tolist(), both["doc_id"].tolist(), strict=True))
    unknown = [k for k in keys if weights is not None and k not in weights]
    if unknown:
        raise InputError(
            f"{len(unknown)} pair(s) graded by both people and the LLM are not in the "
            f"also-judged manifest, e.g. ({unknown[0][0]}, {unknown[0][1]})",
            hint="give the LLM grades of that grade --also-judged run, or leave the manifest out",
        )
    position = dict(zip(_keys(merged), range(len(merged)), strict=False))
    llm_grades = both["llm"].astype("int64")
    if scale is not None:
        llm_grades = llm_grades.map(dict(scale)).astype("int64")
    query_code = np.zeros(len(merged), dtype=np.int64)
    query_code[ranked.ideal_grade] = ranked.ideal_query  # the coded ideal lists every pair
    return Overlap(
        grades=merged["grade"].to_numpy(dtype=np.int64),
        holes=len(holes),
        pairs=np.array([position[k] for k in _keys(both)], dtype=np.int64),
        llm=np.asarray(llm_grades.to_numpy(), dtype=np.int64),
        weights=np.array([1.0 if weights is None else weights[k] for k in keys], dtype=np.float64),
        hole_raw=holes["grade"].to_numpy(dtype=np.int64),
        pair_raw=both["llm"].to_numpy(dtype=np.int64),
        query_code=query_code,
        n_queries=ranked.n_queries,
    )


def _intervals(
    result: FillResult,
    coded: Mapping[str, Ranked],
    parsed: Sequence[Measure],
    overlap: Overlap,
    missing: Missing,
    level: float,
    seed: int,
    check: bool,
    baseline: str | None,
) -> None:
    """The filled score's intervals (`corrected_interval`), the reasons some get none
    (`refusals`; dropped unless `check` is False) and the differences from `baseline`."""
    holes_sample = result.design == "holes"
    intervals, effects = corrected_interval(
        coded, parsed, overlap, missing=missing, level=level, seed=seed, holes_sample=holes_sample
    )
    result.refused = refusals(coded, parsed, overlap, result.design)
    for run, reasons in result.refused.items():
        for measure in reasons if check else ():
            intervals[run].pop(measure, None)
    result.intervals, result.interval_note = intervals, note(level, overlap)
    if baseline is not None:
        refused = result.refused if check else None
        result.baseline = baseline
        result.differences = corrected_differences(
            effects, baseline, parsed, overlap.weights, overlap.holes, level=level, refused=refused
        )


# The correction learns the LLM's errors from the overlap, valid where it resembles the holes: on
# a run's top k, the holes' and the overlap's distributions over cells (rank band x LLM grade)
# must overlap by `MIN_REACH` with `MIN_SLOTS` overlap slots (bench/fill_coverage.py), and at
# most `MAX_UNJUDGED` of the slots may be graded by nobody.
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
