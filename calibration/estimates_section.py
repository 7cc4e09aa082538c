"""The `estimates` section of `relgrade calibrate`: PPI++ estimates that follow the sample design.
`runs` exist under whole queries only; below FEW_QUERIES they are human-only, which covered better
than PPI++ on 3-6 queries (bench/whole_queries_runs.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from calibration.join import PairedGrades, distribution_mean, pair_keys, relevance_prediction
from calibration.spotcheck.stopping import DrawOrder, GradedPart, graded_part, stopping_figures
from calibration.stats.ppi import FEW_QUERIES, SampleDesign, caution, ppi_mean
from calibration.stats.ppi_clusters import crossfit_cluster_share
from calibration.summary_model import Design, Estimate, Estimates

Weights = npt.NDArray[np.float64] | None
MEAN_GRADE_NOTE = (
    "the agreement intervals resample queries: they say how the figures would vary on "
    "another set of queries like these, not how well the sample measures these pairs; "
    "for these pairs' mean bias see estimates.mean_grade (mean_bias, mean_bias_ci: "
    "design-based, 1/pi)"
)


def per_query_scores(qrels: pd.DataFrame, run: pd.DataFrame, measure: str) -> pd.Series:
    """One measure per judged query (queries absent from the run score 0), indexed by query_id."""
    from grader.metrics import evaluate, parse_measure  # only needed when runs are given

    long = evaluate(qrels, run, [parse_measure(measure)], missing="zero")
    long = long[long["query_id"].astype(str) != "all"]
    means: pd.Series = long.groupby(long["query_id"].astype(str))["value"].mean()
    return means.astype(np.float64)


def estimates_section(
    paired: PairedGrades,
    design: SampleDesign,
    weights: Weights,
    threshold: int,
    runs: Mapping[str, pd.DataFrame] | None,
    measures: Sequence[str],
    *,
    order: DrawOrder | None = None,
    binary: bool = False,
) -> tuple[Estimates, list[str]]:
    """The `estimates` section and its notes for people. `binary`: people graded 0/1, so a
    human 1 is relevant and there is no mean grade on the LLM's 0..3 scale."""
    share = relevant_share(paired, design, weights, threshold, 1 if binary else None, order=order)
    design_json = Design.model_validate(design, from_attributes=True)
    out = Estimates(threshold=threshold, design=design_json, relevant_share=share)
    notes: list[str] = []
    if runs:
        by_measure: dict[str, dict[str, Estimate]] = {}
        for measure in measures:
            by_measure[measure], said = run_estimates(paired, design, weights, runs, measure)
            notes = notes if measure != measures[0] else said
        out.runs, out.runs_by_measure = by_measure[measures[0]], by_measure
    if not binary:
        out.mean_grade = mean_grade(paired, design, weights, order=order)
        notes.append(MEAN_GRADE_NOTE)
    return out, notes


def relevant_share(
    paired: PairedGrades,
    design: SampleDesign,
    weights: Weights,
    threshold: int,
    human_threshold: int | None = None,
    *,
    order: DrawOrder | None = None,
) -> Estimate:
    """PPI++ estimate of the share of relevant pairs among all LLM-graded pairs (human relevant
    at grade >= `human_threshold`, default `threshold`); with an `order`, its sequence too."""
    human_at = threshold if human_threshold is None else human_threshold
    both, llm = paired.frame, paired.llm
    whole = design.kind == "whole-queries"
    # the prediction in the correction: P(relevant) where the judge gave a grade distribution
    pred_both = relevance_prediction(both["llm"], None if whole else both, threshold)
    pred_llm = relevance_prediction(llm["grade"], None if whole else llm, threshold)
    y = (both["human"].to_numpy() >= human_at).astype(np.float64)
    data, part = _pair_estimate(paired, design, weights, order, y, pred_both, pred_llm, (0, 1))
    data["llm_only"] = float(np.mean(llm["grade"].to_numpy() >= threshold))
    if whole:  # t with (queries - 1) df, as ppi_mean's
        data.update(_cluster_share(paired, y, threshold, data["labelled_clusters"] - 1))
    extra = "" if human_at == threshold else f"; human grade >= {human_at}"
    data["estimand"] = (
        f"share of relevant pairs (grade >= {threshold}{extra}) among these {len(llm)} "
        "LLM-graded pairs"
    )
    if order is not None:
        _add_sequence(data, paired, design, order, threshold, human_at, pred_llm)
    return Estimate.model_validate(_with_part(data, part, design, whole))


def _cluster_share(
    paired: PairedGrades, y: npt.NDArray[np.float64], threshold: int, df: int | None
) -> dict[str, Any]:
    """Whole queries: the cross-fitted share and its jackknife interval (`ppi_clusters`)."""
    both, llm = paired.frame, paired.llm
    ppi, ci, lam = crossfit_cluster_share(
        y,
        (both["llm"].to_numpy() >= threshold).astype(np.float64),
        both["query_id"].to_numpy(),
        (llm["grade"].to_numpy() >= threshold).astype(np.float64),
        llm["query_id"].to_numpy(),
    )
    return {
        "ppi": ppi,
        "ppi_ci": [None if np.isnan(x) else x for x in ci],
        "lambda": lam,
        "interval": f"jackknife over queries, cross-fitted lambda, Isaki-scaled, logit t, {df} df",
    }


def _add_sequence(
    data: dict[str, Any],
    paired: PairedGrades,
    design: SampleDesign,
    order: DrawOrder,
    threshold: int,
    human_at: int,
    pred_llm: npt.NDArray[np.float64],
) -> None:
    """The confidence sequence over the graded prefix; an active sample's fixed-n figures are
    the sequential design's (Des Raj)."""
    both, llm = paired.frame, paired.llm
    both_keys, llm_keys = pair_keys(both), pair_keys(llm)
    seq, figures = stopping_figures(
        order,
        dict(zip(both_keys, both["human"].tolist(), strict=True)),
        dict(zip(llm_keys, llm["grade"].tolist(), strict=True)),
        threshold=threshold,
        human_threshold=human_at,
        predictions=dict(zip(llm_keys, pred_llm.tolist(), strict=True)),
    )
    data.update(figures)
    if seq is not None and design.strategy == "active":
        fixed = seq.estimate if seq.fixed_estimate is None else seq.fixed_estimate
        data["ppi"], data["ppi_ci"] = fixed, list(seq.fixed_ci)
        data["interval"] = f"normal, sequential design (Des Raj), first {seq.n} pairs"


def mean_grade(
    paired: PairedGrades, design: SampleDesign, weights: Weights, *, order: DrawOrder | None = None
) -> Estimate:
    """PPI++ estimate of the mean human grade (0..3) over all LLM-graded pairs, designed as the
    relevant share's, and the pool's mean bias (mean LLM grade minus it) with its interval."""
    both, llm = paired.frame, paired.llm
    whole = design.kind == "whole-queries"
    grades = np.arange(4.0)  # the LLM's expected grade where the judge gave a distribution
    f_both = distribution_mean(both["llm"], None if whole else both, grades)
    f_llm = distribution_mean(llm["grade"], None if whole else llm, grades)
    y = both["human"].to_numpy(dtype=np.float64)
    data, part = _pair_estimate(paired, design, weights, order, y, f_both, f_llm, (0, 3))
    llm_mean = float(llm["grade"].to_numpy(dtype=np.float64).mean())
    low, high = data["ppi_ci"]
    data.update(
        {
            "llm_only": llm_mean,
            "mean_bias": None if data["ppi"] is None else llm_mean - data["ppi"],
            "mean_bias_ci": [
                None if high is None else llm_mean - high,
                None if low is None else llm_mean - low,
            ],
            "estimand": f"mean human grade (0-3) over these {len(llm)} LLM-graded pairs",
        }
    )
    data = _with_part(data, part, design, whole, scale=3.0)
    if data["ppi_ci"] is None:
        data["mean_bias_ci"] = None
    return Estimate.model_validate(data)


def _pair_estimate(
    paired: PairedGrades,
    design: SampleDesign,
    weights: Weights,
    order: DrawOrder | None,
    y: npt.NDArray[np.float64],
    f_both: npt.NDArray[np.float64],
    f_llm: npt.NDArray[np.float64],
    bounds: tuple[float, float],
) -> tuple[dict[str, Any], GradedPart | None]:
    """PPI++ of a per-pair mean under the sample design, with the keys stating its design, and
    the graded part: a uniform sample graded in part uses its graded prefix, pi = t / N."""
    whole = design.kind == "whole-queries"
    part = None if whole else graded_part(paired, design, order)
    graded = set(pair_keys(paired.frame))  # `only`: the LLM-graded pairs people did not grade
    only = np.array([k not in graded for k in pair_keys(paired.llm)], dtype=bool)
    if part is not None and part.prefix is not None and part.t >= 2:
        inside = part.prefix
        unlabelled = np.concatenate([f_llm[only], f_both[~inside]])
        est = ppi_mean(y[inside], f_both[inside], unlabelled, bounds=bounds)
    else:
        est = ppi_mean(
            y,
            f_both,
            f_llm[only],
            weights=weights,
            groups=paired.frame["query_id"].to_numpy() if whole else None,
            groups_unlabelled=paired.llm.loc[only, "query_id"].to_numpy() if whole else None,
            bounds=bounds,
            quantile="t" if whole else "normal",
        )
    framing = {"unit": "pair", "clustered_by": "query" if whole else None}
    return {**est.to_json(), **framing, "design": design.kind, "population": "finite"}, part


def _with_part(
    data: dict[str, Any],
    part: GradedPart | None,
    design: SampleDesign,
    whole: bool,
    scale: float = 1.0,
) -> dict[str, Any]:
    """The estimate's caution (its width judged on [0, 1]: `scale` is the estimand's range), and
    no fixed-n interval when the graded part of a sample is no design sample."""
    ci = data.get("ppi_ci")
    scaled = [None if c is None else c / scale for c in ci] if ci else ci
    said = [caution({**data, "ppi_ci": scaled}, design, "queries" if whole else "pairs") or ""]
    if part is not None:
        if part.prefix is not None:
            data["interval"] = f"normal, first {part.t} pairs of the uniform sample's order"
        prefix_sample = part.prefix is not None and part.t >= 2
        if not prefix_sample and not (part.strategy == "active" and data.get("cs") is not None):
            data["ppi_ci"] = None
        said.append(part.caution())
    data["caution"] = "; ".join(c for c in said if c) or None
    return data


def _query_weights(
    paired: PairedGrades, weights: Weights, labelled: list[str]
) -> npt.NDArray[np.float64] | None:
    """1/pi of each labelled query: that of any of its pairs (None without weights)."""
    if weights is None:
        return None
    per_pair = pd.Series(weights, index=paired.frame["query_id"].astype(str).to_numpy())
    return np.asarray(
        per_pair.groupby(level=0).first().reindex(labelled).to_numpy(), dtype=np.float64
    )


def _llm_only_runs(
    design: SampleDesign,
    llm: pd.DataFrame,
    runs: Mapping[str, pd.DataFrame],
    partly: int,
    common: dict[str, Any],
    measure: str,
) -> tuple[dict[str, Estimate], list[str]]:
    """Each run's LLM-only measure, and why no human-based figure (a pair design, or no query
    graded whole)."""
    why: str | None = None  # said beside each run's estimate: why it has no interval
    if design.kind == "whole-queries":
        why = (
            f"LLM-only: none of the {partly} sampled queries is wholly graded by people, and "
            "a per-query measure needs every pair of a query graded; grade the rest of their pairs"
        )
        note = f"per-run estimates are {why}"
    else:
        note = (
            "per-run estimates are LLM-only: a per-query measure needs the whole query graded "
            f"by people, and the human grades are {design.text} (draw the sample with "
            "`relgrade sample --strategy whole-queries`)"
        )
    empty = {"human_only": None, "ppi": None, "ppi_ci": None, "human_only_ci": None}
    out = {}
    for name, run in runs.items():
        f = per_query_scores(llm, run, measure)
        data = {"llm_only": float(f.mean()) if len(f) else None, **empty, "n_labelled": 0}
        out[name] = Estimate.model_validate(
            {**data, "n_unlabelled": len(f), "caution": why, **common}
        )
    return out, [note]


def run_estimates(
    paired: PairedGrades,
    design: SampleDesign,
    weights: Weights,
    runs: Mapping[str, pd.DataFrame],
    measure: str,
) -> tuple[dict[str, Estimate], list[str]]:
    """Each run's mean measure: PPI++ over whole queries, or LLM-only with the reason."""
    llm = paired.llm
    llm_per_query = llm.groupby("query_id").size()
    both_per_query = (
        paired.frame.groupby("query_id").size().reindex(llm_per_query.index, fill_value=0)
    )
    full = both_per_query == llm_per_query
    labelled = sorted(str(q) for q in full[full].index)
    partly = int((both_per_query > 0).sum()) - len(labelled)
    common = {
        "measure": measure,
        "unit": "query",
        "design": design.kind,
        "population": "finite",
        "estimand": f"mean {measure} over these {len(llm_per_query)} queries with LLM grades",
    }
    if design.kind != "whole-queries" or not labelled:
        return _llm_only_runs(design, llm, runs, partly, common, measure)
    left_out = None
    if partly:
        left_out = (
            f"{partly} queries of the sample are only partly graded by people: they are left "
            "out of the per-run estimates (grade the rest of their pairs to count them)"
        )
    query_weights = _query_weights(paired, weights, labelled)
    few = len(labelled) < FEW_QUERIES  # PPI++ would cover less than human-only (module docstring)
    frame = paired.frame[paired.frame["query_id"].isin(labelled)]
    human_qrels = frame[["query_id", "doc_id", "human"]].rename(columns={"human": "grade"})
    out: dict[str, Estimate] = {}
    for name, run in runs.items():
        f_all = per_query_scores(llm, run, measure)
        est = ppi_mean(
            per_query_scores(human_qrels, run, measure).reindex(labelled).to_numpy(),
            f_all.reindex(labelled).to_numpy(),
            f_all.drop(index=labelled, errors="ignore").to_numpy(),
            weights=query_weights,
            bounds=(0.0, 1.0),  # every measure lies in [0, 1]
            quantile="t",
            lam=0.0 if few else None,
        ).to_json()
        data = {**est, "labelled_clusters": len(labelled), **common}
        if few:
            data["interval"] = f"human-only (below {FEW_QUERIES} whole queries), {est['interval']}"
        said = [c for c in (caution(data, design, "queries"), left_out) if c]
        data["caution"] = "; ".join(said) or None
        out[name] = Estimate.model_validate(data)
    return out, [left_out] if left_out else []
