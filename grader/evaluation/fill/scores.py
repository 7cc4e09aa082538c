"""Scores on top of people's labels: each run three ways, and how much of it rests on the LLM.

The regimes (docs/filling-holes.md): `holes_nonrelevant` (people's qrels alone, as trec_eval),
`judged_only` (condensed lists; measures without a condensed form as they are) and `filled`
(people's grade where there is one, the LLM's, mapped by `scale`, on the holes). All average
over people's queries (the LLM's grades elsewhere are counted in `FillResult.outside`), so the
three are comparable. `Shares` says who judged each run's top k; with pairs graded by both, the
filled score gets an interval (`fill.interval`). Pure: DataFrames in, DataFrames out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from grader.errors import InputError
from grader.evaluation.fill.interval import Interval, corrected_interval
from grader.metrics import registry
from grader.metrics.evaluate import Missing, Scores, depth_needed, score
from grader.metrics.measures import Measure, parse_measure

if TYPE_CHECKING:
    import pandas as pd

    from grader.evaluation.fill.reach import Reach
    from grader.metrics.judged_rows import Ranked
    from grader.metrics.rank_order import Precision

Design = Literal["judged", "holes"]

REGIMES = ("holes_nonrelevant", "judged_only", "filled")
SOURCES = ("human", "llm", "unjudged")


def condensed_form(measure: Measure) -> Measure:
    """The judged_only=True form of a measure, or the measure itself when it has none."""
    if registry.get(measure.name).judged_only:
        return dataclasses.replace(measure, judged_only=True)
    return measure


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

    def frame(self, per_query: bool = False) -> pd.DataFrame:
        """The long frame [run, query_id, measure, regime, value] ("all": the mean, counts summed),
        with `corrected, ci_low, ci_high` on the filled means with an interval, `reason` on those
        refused.
        """
        import pandas as pd

        rows: list[dict[str, object]] = []
        for run, regimes in self.scores.items():
            for regime in REGIMES:
                rows.extend(_rows(run, regime, regimes[regime], self.measures, per_query))
            for row in rows:
                if row["run"] == run and row["regime"] == "filled" and row["query_id"] == "all":
                    found = self.intervals.get(run, {}).get(str(row["measure"]))
                    if found is not None:
                        row["corrected"] = found.estimate
                        row["ci_low"], row["ci_high"] = found.low, found.high
                    why = self.refused.get(run, {}).get(str(row["measure"]))
                    if why is not None:
                        row["reason"] = why
        return pd.DataFrame(rows)

    def shares_frame(self) -> pd.DataFrame:
        """[run, k, source, share]: who graded each run's top k (k None: the whole ranking)."""
        import pandas as pd

        rows = [
            {"run": run, "k": s.k, "source": source, "share": s.share(source)}
            for run, s in self.shares.items()
            for source in SOURCES
        ]
        return pd.DataFrame(rows, columns=["run", "k", "source", "share"])


def _rows(
    run: str, regime: str, scores: Scores, names: list[str], per_query: bool
) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    means = [value for _, value in scores.means()]
    for name, values, mean in zip(names, scores.values.tolist(), means, strict=True):
        if per_query:
            for qid, value in zip(scores.query_ids, values, strict=True):
                rows.append(
                    {"run": run, "query_id": qid, "measure": name, "regime": regime, "value": value}
                )
        rows.append(
            {"run": run, "query_id": "all", "measure": name, "regime": regime, "value": mean}
        )
    return rows


def merge(
    human: pd.DataFrame, llm: pd.DataFrame, scale: Mapping[int, int] | None = None
) -> pd.DataFrame:
    """People's qrels plus the LLM's (mapped) grade of every pair they did not judge."""
    import pandas as pd

    holes = _holes(human, llm)
    grades = holes["grade"].astype("int64")
    if scale is not None:
        grades = grades.map(dict(scale)).astype("int64")
    filled = pd.DataFrame(
        {"query_id": holes["query_id"], "doc_id": holes["doc_id"], "grade": grades}
    )
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
    the intervals `fill.reach` refuses; `baseline`: the corrected differences from that run.
    """
    from grader.metrics.join_arrow import join

    parsed = [parse_measure(m) for m in measures]
    names = [str(m) for m in parsed]
    if baseline is not None and baseline not in runs:
        raise InputError(
            f"the baseline {baseline!r} is none of the runs", hint=f"one of {', '.join(runs)}"
        )
    people = set(human["query_id"].astype(str))
    inside = llm["query_id"].astype(str).isin(people).to_numpy()
    outside = llm[~inside]
    llm = llm[inside].reset_index(drop=True)
    merged = merge(human, llm, scale)
    n_human = len(human)
    coded = merged.assign(grade=np.arange(len(merged), dtype=np.int64))
    result = FillResult(measures=names, holes=len(merged) - n_human, queries=len(people))
    result.outside, result.outside_queries = len(outside), outside["query_id"].nunique()
    depth = depth_needed(parsed)
    ranked_coded = {}
    for name, run in runs.items():
        result.scores[name] = _regimes(human, merged, run, parsed, precision, depth, missing)
        ranked_coded[name] = join(coded, run, precision=precision, depth=depth)
        result.shares[name] = _shares(ranked_coded[name], n_human, depth)
    both = overlap_pairs(human, llm)
    if design == "holes" and weights is not None:
        both = both[[k in weights for k in zip(both["query_id"], both["doc_id"], strict=True)]]
    result.overlap, result.design = len(both), design
    if len(both) > 1 and level is not None:
        _intervals(result, ranked_coded, parsed, merged, human, llm, both, scale, weights,
                   missing=missing, level=level, seed=seed, check=check,
                   baseline=baseline)  # fmt: skip
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

    condensed = [condensed_form(m) for m in parsed]
    plain = score(join(human, run, precision=precision, depth=depth), parsed, missing=missing)
    cond = score(join(human, run, precision=precision), condensed, missing=missing)
    filled = score(join(merged, run, precision=precision, depth=depth), parsed, missing=missing)
    cond = dataclasses.replace(cond, measures=[str(m) for m in parsed])
    return {"holes_nonrelevant": plain, "judged_only": cond, "filled": filled}


def _intervals(
    result: FillResult,
    ranked_coded: Mapping[str, Ranked],
    parsed: Sequence[Measure],
    merged: pd.DataFrame,
    human: pd.DataFrame,
    llm: pd.DataFrame,
    both: pd.DataFrame,
    scale: Mapping[int, int] | None,
    weights: Mapping[tuple[str, str], float] | None,
    *,
    missing: Missing,
    level: float,
    seed: int,
    check: bool,
    baseline: str | None = None,
) -> None:
    """The filled score's intervals (`corrected_interval`), and the reasons (`fill_reach`)
    for the runs and measures that get none."""
    position = dict(zip(_keys(merged), range(len(merged)), strict=False))
    pairs = np.array([position[k] for k in _keys(both)], dtype=np.int64)
    llm_grades = both["llm"].astype("int64")
    if scale is not None:
        llm_grades = llm_grades.map(dict(scale)).astype("int64")
    hole_raw = _holes(human, llm)["grade"].to_numpy(dtype=np.int64)
    pair_raw = both["llm"].to_numpy(dtype=np.int64)
    first = len(human)
    effects: dict[str, tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]] = {}
    overlap_weights = _overlap_weights(both, weights)
    grades = merged["grade"].to_numpy(dtype=np.int64)
    intervals, note = corrected_interval(
        ranked_coded, parsed, grades, pairs, np.asarray(llm_grades.to_numpy(), dtype=np.int64),
        overlap_weights, result.holes, raw=(hole_raw, pair_raw), missing=missing, level=level,
        seed=seed, holes_sample=result.design == "holes", effects_out=effects,
    )  # fmt: skip
    raw_of = np.full(len(merged), -1, dtype=np.int64)
    raw_of[first:] = hole_raw
    raw_of[pairs] = pair_raw
    result.refused = _reasons(ranked_coded, parsed, first, pairs, raw_of, result.design)
    for run, reasons in result.refused.items():
        for measure in reasons if check else ():
            intervals[run].pop(measure, None)
    result.intervals = intervals
    result.interval_note = note
    if baseline is not None:
        from grader.evaluation.fill.interval import corrected_differences

        result.baseline = baseline
        refused = result.refused if check else None
        result.differences = corrected_differences(
            effects, baseline, parsed, overlap_weights, result.holes, level=level, refused=refused
        )


def _reasons(
    ranked_coded: Mapping[str, Ranked],
    parsed: Sequence[Measure],
    first: int,
    pairs: npt.NDArray[np.int64],
    raw_of: npt.NDArray[np.int64],
    design: Design,
) -> dict[str, dict[str, str]]:
    """run -> measure -> why it gets no interval (`grader.evaluation.fill.reach`), one reach per
    run and cutoff."""
    from grader.evaluation.fill.reach import reach

    out: dict[str, dict[str, str]] = {}
    for run, ranked in ranked_coded.items():
        found: dict[int | None, Reach] = {}
        for measure in parsed:
            k = measure.cutoff
            if k not in found:
                found[k] = reach(ranked, k, first, pairs, raw_of)
            why = found[k].reason(run, design)
            if why is not None:
                out.setdefault(run, {})[str(measure)] = why
    return out


def _overlap_weights(
    both: pd.DataFrame, weights: Mapping[tuple[str, str], float] | None
) -> npt.NDArray[np.float64]:
    """1/pi of each overlap pair (1 without a manifest); a pair the manifest lacks is an error:
    its inclusion probability is unknown."""
    if weights is None:
        return np.ones(len(both), dtype=np.float64)
    keys = list(zip(both["query_id"].tolist(), both["doc_id"].tolist(), strict=True))
    missing = [k for k in keys if k not in weights]
    if missing:
        q, d = missing[0]
        raise InputError(
            f"{len(missing)} pair(s) graded by both people and the LLM are not in the "
            f"also-judged manifest, e.g. ({q}, {d})",
            hint="give the LLM grades of that grade --also-judged run, or leave the manifest out",
        )
    return np.array([weights[k] for k in keys], dtype=np.float64)


def _shares(coded: object, n_human: int, depth: int | None) -> Shares:
    """Counts by source of the run's top-`depth` results over the qrels queries."""
    from grader.metrics.judged_rows import Ranked

    assert isinstance(coded, Ranked)
    human = int((coded.grade < n_human).sum())
    llm = int(len(coded.grade) - human)
    unjudged = int(coded.returned.sum()) - human - llm
    return Shares(depth, human, llm, unjudged)
