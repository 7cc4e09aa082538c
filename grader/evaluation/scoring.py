"""One evaluation of several runs against one qrels: scores, `--format json`'s records, warnings
and notes, shared by `relgrade evaluate` and `relgrade.evaluate`. An unjudged result counts as not
relevant, so a measure looking where more than `UNJUDGED_SHARE` is unjudged gets a caution, and a
run whose top 10 is almost never judged (`MISMATCH_JUDGED`) most likely names other ids."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from grader.metrics import DEFAULT_MEASURES, parse_measures
from grader.metrics.binary import judged_of_returned
from grader.metrics.evaluate import Missing, Scores, depth_needed, exact_mean, score
from grader.metrics.foreign import TREC_EVAL_LEVEL
from grader.metrics.judged_rows import JudgedRun, Ranked
from grader.metrics.measures import (
    Measure,
    foreign_lines,
    is_summed,
    requested_names,
    resolve_thresholds,
)
from grader.spelling import option


class RunJoin(Protocol):
    """A run joined with the qrels, looked up to the given depth (None: whole rankings), its
    ties ranked as trec_eval does or (`ties="asc"`) as ir_measures' RR@k and Judged@k do."""

    def __call__(self, depth: int | None, ties: str | None = None) -> JudgedRun: ...


@dataclass
class Evaluation:
    """Each run's scores, the canonical measure names, and the stderr lines: `warnings` (warnings in
    the API) and `notes`; `requested` the names as asked when one is another tool's; `judged_shares`
    (run, measure) -> the judged share of a measure looking deeper than the labels."""

    results: list[tuple[str, Scores]]
    measures: list[str]
    skip_missing: bool
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    requested: list[str] | None = None
    judged_shares: dict[tuple[str, str], float] = field(default_factory=dict)

    def records(self, per_query: bool) -> list[dict[str, Any]]:
        """`--format json`'s records (NaN kept), with "requested" and "judged_share" where they
        apply."""
        rows = [r for name, scores in self.results for r in _records(name, scores, per_query)]
        asked = dict(zip(self.measures, self.requested or [], strict=False))
        for row in rows:
            if self.requested is not None:
                row["requested"] = asked[row["measure"]]
            share = self.judged_shares.get((row["run"], row["measure"]))
            if share is not None and row["query_id"] == "all":
                row["judged_share"] = share
        return rows

    def columns(self) -> list[str]:
        """The records' keys, for CSV: the four, then those some records add."""
        extra = ["requested"] if self.requested is not None else []
        extra += ["judged_share"] if self.judged_shares else []
        return ["run", "query_id", "measure", "value", *extra]


def check_measures(given: Sequence[str | Measure | Any] | None) -> list[str | Measure | Any]:
    """The measures asked for (default: DEFAULT_MEASURES): names, Measures or ir_measures
    objects, each checked before any file is read."""
    names: list[str | Measure | Any] = list(given) if given else list(DEFAULT_MEASURES)
    parse_measures([n for n in names if not isinstance(n, Measure)])
    return names


def evaluate_judged(
    facts: Mapping[str, Any],
    runs: Sequence[tuple[str, RunJoin]],
    given: Sequence[str | Measure | Any] | None,
    *,
    missing: Missing = "zero",
    clamp: bool = False,
    trec_eval_level: int = TREC_EVAL_LEVEL,
) -> Evaluation:
    """Score each named run against the qrels `facts` describe (as `read_grades` gives them); the
    thresholds decided, unknown ids and measures deeper than the labels are said in `warnings`."""
    names = check_measures(given)
    top = facts.get("top")
    measures, warnings = resolve_thresholds(
        names, top, typed=bool(given), trec_eval_level=trec_eval_level
    )
    if clamp and facts.get("source") == "trec":
        warnings.append(
            f"{option('--clamp', 'clamp=True')} is for judgments and grades CSV: TREC qrels "
            "keep every grade"
        )
    depth = depth_needed(measures)
    evaluation = Evaluation([], [str(m) for m in measures], missing == "skip", warnings)
    evaluation.requested = requested_names(names, top, trec_eval_level)
    for name, join in runs:
        joined = join(depth)
        scores = _scores(join, joined, measures, depth, missing)
        evaluation.results.append((name, scores))
        warning = _run_warning(name, joined.rows, scores)
        warning = warning or mismatch_warning(name, joined.ranked, depth)
        deep = too_deep(joined.ranked, measures)
        evaluation.judged_shares.update({(name, d.measure): d.judged_share for d in deep})
        if warning or deep:
            warnings.append(warning or caution_line(name, deep))
    evaluation.notes = foreign_lines(names, trec_eval_level)
    evaluation.notes += [_note(n, s, evaluation.skip_missing) for n, s in evaluation.results]
    evaluation.notes += _fact_notes(facts)
    return evaluation


def _scores(
    join: RunJoin, joined: JudgedRun, measures: list[Measure], depth: int | None, missing: Missing
) -> Scores:
    """Every measure of one run: those with `ties=asc` on the run ranked that way."""
    apart = [m for m in measures if dict(m.params).get("ties") is not None]
    if not apart:
        return score(joined.ranked, measures, missing=missing)
    plain = score(joined.ranked, [m for m in measures if m not in apart], missing=missing)
    other = score(join(depth, ties=apart[0].param("ties")).ranked, apart, missing=missing)
    rows = {m: v for s in (plain, other) for m, v in zip(s.measures, s.values, strict=True)}
    names = [str(m) for m in measures]
    return replace(plain, measures=names, values=np.stack([rows[n] for n in names]))


def _fact_notes(facts: Mapping[str, Any]) -> list[str]:
    notes = []
    if facts.get("clamped"):
        clamp = option("--clamp", "clamp=True")
        notes.append(f"{facts['clamped']} grades outside 0..3 were clamped ({clamp})")
    if facts.get("ungraded"):
        notes.append(
            f"{facts['ungraded']} rows with an empty grade were left out (unjudged, not 0)"
        )
    if facts.get("failed"):
        notes.append(
            f"{facts['failed']} failed judgments left unjudged (not relevant, no gain; "
            "Judged@k shows where)"
        )
    return notes


def _records(name: str, scores: Scores, with_queries: bool) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if with_queries:
        for measure, values in zip(scores.measures, scores.values.tolist(), strict=True):
            for qid, value in zip(scores.query_ids, values, strict=True):
                rows.append({"run": name, "query_id": qid, "measure": measure, "value": value})
    for measure, value in scores.means():
        rows.append({"run": name, "query_id": "all", "measure": measure, "value": value})
    counts = {m for m in scores.measures if is_summed(m)}
    for row in rows:
        if row["measure"] in counts and not math.isnan(row["value"]):
            row["value"] = int(row["value"])  # counts print as trec_eval prints them
    return rows


def _note(name: str, scores: Scores, skip: bool) -> str:
    missing = len(scores.missing)
    total = scores.qrels_queries
    text = f"{name}: answers {total - missing} of {total} qrels queries"
    if missing:
        text += (
            f"; {missing} left out of the mean "
            f"({option('--trec-eval-missing', 'trec_eval_missing=True')})"
            if skip
            else f"; {missing} missing scored 0 and counted in the mean"
        )
    strays = len(scores.unjudged_queries)
    if strays:
        text += f"; {strays} run {'query' if strays == 1 else 'queries'} not in the qrels ignored"
    return text


def _run_warning(name: str, rows: int, scores: Scores) -> str | None:
    """A warning when a run cannot score: it is empty, or answers no qrels query."""
    total = scores.qrels_queries
    if not rows:
        return f"warning: run {name} is empty: it answers none of the {total} qrels queries"
    if len(scores.missing) == total:
        strays = scores.unjudged_queries
        example = f" (its queries, e.g. {strays[0]!r}, are not in the qrels)" if strays else ""
        return (
            f"warning: run {name} answers none of the {total} qrels queries{example}: are the "
            "run and the qrels for the same topics?"
        )
    return None


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


def too_deep(ranked: Ranked, measures: Sequence[Measure]) -> list[DeepMeasure]:
    """The measures whose depth holds more than `UNJUDGED_SHARE` unjudged results, labelled
    `Judged@k` (the whole ranking: `Judged@n` when every answered query returns n results)."""
    lengths = set(ranked.returned[ranked.returned > 0].tolist())
    whole = f"Judged@{lengths.pop()}" if len(lengths) == 1 else "Judged (whole ranking)"
    shares: dict[int | None, float] = {}
    deep = []
    for measure in measures:
        if measure.name in _JUDGED_ONLY_READERS or measure.judged_only:
            continue
        if measure.cutoff not in shares:
            shares[measure.cutoff] = judged_share(ranked, measure.cutoff)
        share = shares[measure.cutoff]
        if not math.isnan(share) and 1.0 - share > UNJUDGED_SHARE + 1e-12:
            label = whole if measure.cutoff is None else f"Judged@{measure.cutoff}"
            deep.append(DeepMeasure(str(measure), label, share))
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
