"""The `estimates` section of `relgrade calibrate`: PPI++ estimates that follow the sample design.

`relevant_share` and `mean_grade` are over the N LLM-graded pairs (pair designs: 1/pi weights;
whole queries: `calibration.stats.ppi_clusters`). `runs` exist under whole queries only (a
per-query measure needs the query graded whole); below FEW_QUERIES they are human-only, which
covered better than PPI++ on 3-6 queries (bench/whole_queries_runs.py). Every estimate names
its design and estimand, and a `caution` when its interval could mislead.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from calibration.join import PairedGrades, relevance_prediction
from calibration.spotcheck.graded_part import GradedPart, graded_part
from calibration.spotcheck.stopping import DrawOrder, stopping_figures
from calibration.stats.ppi import MeanEstimate, ppi_mean
from calibration.stats.ppi_clusters import crossfit_cluster_share
from calibration.stats.ppi_design import FEW_QUERIES, SampleDesign, caution
from calibration.summary_model import Design, Estimate, Estimates

# (qrels frame query_id/doc_id/grade, run frame, measure) -> one value per judged query
Scorer = Callable[[pd.DataFrame, pd.DataFrame, str], pd.Series]


def estimates_section(
    paired: PairedGrades,
    *,
    design: SampleDesign,
    weights: npt.NDArray[np.float64] | None,
    threshold: int,
    runs: Mapping[str, pd.DataFrame] | None,
    measure: str,
    scorer: Scorer,
    human_threshold: int | None = None,
    order: DrawOrder | None = None,
    binary: bool = False,
) -> tuple[Estimates, list[str]]:
    """The `estimates` section (threshold, design, relevant_share, mean_grade, runs) and notes
    for people.

    `human_threshold` (default `threshold`) is the human grade that means relevant: 1 when people
    graded on a binary scale, else every human pair would count as irrelevant. `binary`: people
    graded 0/1, so there is no mean grade on the LLM's 0..3 scale."""
    out = Estimates(
        threshold=threshold,
        design=Design.model_validate(design.to_json()),
        relevant_share=relevant_share(
            paired, design, weights, threshold, human_threshold, order=order
        ),
    )
    if not binary:
        out.mean_grade = mean_grade(paired, design, weights, order=order)
    notes: list[str] = []
    if runs:
        out.runs, notes = run_estimates(paired, design, weights, runs, measure, scorer)
    return out, notes


def relevant_share(
    paired: PairedGrades,
    design: SampleDesign,
    weights: npt.NDArray[np.float64] | None,
    threshold: int,
    human_threshold: int | None = None,
    *,
    order: DrawOrder | None = None,
) -> Estimate:
    """PPI++ estimate of the share of relevant pairs among all LLM-graded pairs (a human pair is
    relevant at grade >= `human_threshold`, by default `threshold`). With the draw `order` of a
    uniform or active sample, also the confidence sequence (`cs`, `more_for_0_05`); an active
    sample's `ppi` and `ppi_ci` are then the sequential design's (Des Raj) fixed-n figures
    (`calibration.stats.confseq.regression_fixed`)."""
    human_at = threshold if human_threshold is None else human_threshold
    both, llm = paired.frame, paired.llm
    only = _not_graded(paired)
    whole = design.kind == "whole-queries"
    # the prediction in the correction: P(relevant) where the judge gave a grade distribution
    pred_both = relevance_prediction(both["llm"], None if whole else both, threshold)
    pred_llm = relevance_prediction(llm["grade"], None if whole else llm, threshold)
    part = None if whole else graded_part(paired, design, order)
    y = (both["human"].to_numpy() >= human_at).astype(np.float64)
    est = design_ppi(
        paired, design, y, pred_both, pred_llm[only], only, weights, part, bounds=(0.0, 1.0)
    )
    data = est.to_json()
    data["llm_only"] = float(np.mean(llm["grade"].to_numpy() >= threshold))
    if whole:
        ppi, ci, lam = crossfit_cluster_share(
            (both["human"].to_numpy() >= human_at).astype(np.float64),
            (both["llm"].to_numpy() >= threshold).astype(np.float64),
            both["query_id"].to_numpy(),
            (llm["grade"].to_numpy() >= threshold).astype(np.float64),
            llm["query_id"].to_numpy(),
        )
        clean = [None if np.isnan(x) else x for x in ci]
        data.update({"ppi": ppi, "ppi_ci": clean, "lambda": lam})
        data["interval"] = (
            f"jackknife over queries, cross-fitted lambda, Isaki-scaled, logit t, {est.df} df"
        )
    data = {
        **data,
        "unit": "pair",
        "clustered_by": "query" if whole else None,
        "design": design.kind,
        "population": "finite",
        "estimand": f"share of relevant pairs (grade >= {threshold}"
        + ("" if human_at == threshold else f"; human grade >= {human_at}")
        + f") among these {len(llm)} LLM-graded pairs",
    }
    if order is not None:
        both_keys = list(zip(both["query_id"].tolist(), both["doc_id"].tolist(), strict=True))
        llm_keys = list(zip(llm["query_id"].tolist(), llm["doc_id"].tolist(), strict=True))
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
    return Estimate.model_validate(_with_part(data, part, design, whole))


def _not_graded(paired: PairedGrades) -> npt.NDArray[np.bool_]:
    """Which LLM-graded pairs (rows of `paired.llm`) people did not grade."""
    both, llm = paired.frame, paired.llm
    graded = set(zip(both["query_id"].tolist(), both["doc_id"].tolist(), strict=True))
    every = zip(llm["query_id"].tolist(), llm["doc_id"].tolist(), strict=True)
    return np.fromiter((k not in graded for k in every), dtype=bool, count=len(llm))


def _expected_grade(frame: pd.DataFrame, column: str) -> npt.NDArray[np.float64]:
    """The LLM's expected grade where the judge gave a grade distribution, else its grade."""
    out = frame[column].to_numpy(dtype=np.float64).copy()
    cols = [f"p_grade_{g}" for g in range(4)]
    if all(c in frame.columns for c in cols):
        p = frame[cols].to_numpy(dtype=np.float64)
        known = ~np.isnan(p).any(axis=1)
        out[known] = p[known] @ np.arange(4.0)
    return out


def mean_grade(
    paired: PairedGrades,
    design: SampleDesign,
    weights: npt.NDArray[np.float64] | None,
    *,
    order: DrawOrder | None = None,
) -> Estimate:
    """PPI++ estimate of the mean human grade (0..3) over all LLM-graded pairs, design-based as
    the relevant share's (1/pi, query clusters and t for whole queries; a uniform sample graded
    in part by its prefix), the LLM's expected grade (or grade) as the prediction; and the
    pool's mean bias (mean LLM grade, known for every pair, minus it) with its interval."""
    both, llm = paired.frame, paired.llm
    only = _not_graded(paired)
    whole = design.kind == "whole-queries"
    part = None if whole else graded_part(paired, design, order)
    f_both = both["llm"].to_numpy(dtype=np.float64) if whole else _expected_grade(both, "llm")
    f_llm = llm["grade"].to_numpy(dtype=np.float64) if whole else _expected_grade(llm, "grade")
    y = both["human"].to_numpy(dtype=np.float64)
    est = design_ppi(paired, design, y, f_both, f_llm[only], only, weights, part, bounds=(0, 3))
    data = est.to_json()
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
            "unit": "pair",
            "clustered_by": "query" if whole else None,
            "design": design.kind,
            "population": "finite",
            "estimand": f"mean human grade (0-3) over these {len(llm)} LLM-graded pairs",
        }
    )
    data = _with_part(data, part, design, whole, scale=3.0)
    if data["ppi_ci"] is None:
        data["mean_bias_ci"] = None
    return Estimate.model_validate(data)


def design_ppi(
    paired: PairedGrades,
    design: SampleDesign,
    y: npt.NDArray[np.float64],
    f_both: npt.NDArray[np.float64],
    f_only: npt.NDArray[np.float64],
    only: npt.NDArray[np.bool_],
    weights: npt.NDArray[np.float64] | None,
    part: GradedPart | None,
    *,
    bounds: tuple[float, float],
) -> MeanEstimate:
    """PPI++ of a per-pair mean under the sample design: 1/pi weights, query clusters and t for
    whole queries; a uniform sample graded in part uses its graded prefix with pi = t / N
    (`calibration.spotcheck.graded_part`; the other graded pairs count as LLM-only there).
    `only` marks the LLM-graded pairs (rows of `paired.llm`) people did not grade."""
    if part is not None and part.prefix is not None and part.t >= 2:
        inside = part.prefix
        unlabelled = np.concatenate([f_only, f_both[~inside]])
        return ppi_mean(y[inside], f_both[inside], unlabelled, bounds=bounds)
    whole = design.kind == "whole-queries"
    return ppi_mean(
        y,
        f_both,
        f_only,
        weights=weights,
        groups=paired.frame["query_id"].to_numpy() if whole else None,
        groups_unlabelled=paired.llm.loc[only, "query_id"].to_numpy() if whole else None,
        bounds=bounds,
        quantile="t" if whole else "normal",
    )


def _with_part(
    data: dict[str, Any],
    part: GradedPart | None,
    design: SampleDesign,
    whole: bool,
    scale: float = 1.0,
) -> dict[str, Any]:
    """The estimate's caution (its width judged on a [0, 1] scale: `scale` is the estimand's
    range), and no fixed-n interval when only part of a sample is graded and that part is no
    design sample (`calibration.spotcheck.graded_part`)."""
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


def _left_out(partly: int) -> str | None:
    """The note on sampled queries people graded only in part (left out of per-run figures)."""
    if not partly:
        return None
    return (
        f"{partly} queries of the sample are only partly graded by people: they are left "
        "out of the per-run estimates (grade the rest of their pairs to count them)"
    )


def _query_weights(
    paired: PairedGrades, weights: npt.NDArray[np.float64] | None, labelled: list[str]
) -> npt.NDArray[np.float64] | None:
    """1/pi of each labelled query: that of any of its pairs (None without weights)."""
    if weights is None:
        return None
    per_pair = pd.Series(weights, index=paired.frame["query_id"].astype(str).to_numpy())
    return np.asarray(
        per_pair.groupby(level=0).first().reindex(labelled).to_numpy(), dtype=np.float64
    )


def run_estimates(
    paired: PairedGrades,
    design: SampleDesign,
    weights: npt.NDArray[np.float64] | None,
    runs: Mapping[str, pd.DataFrame],
    measure: str,
    scorer: Scorer,
) -> tuple[dict[str, Estimate], list[str]]:
    """Each run's mean measure: PPI++ over whole queries, or LLM-only with the reason."""
    llm = paired.llm
    llm_per_query = llm.groupby("query_id").size()
    both_per_query = paired.frame.groupby("query_id").size()
    full = both_per_query.reindex(llm_per_query.index, fill_value=0) == llm_per_query
    labelled = sorted(str(q) for q in full[full].index)
    partly = int((both_per_query.reindex(llm_per_query.index, fill_value=0) > 0).sum())
    partly -= len(labelled)
    common = {
        "measure": measure,
        "unit": "query",
        "design": design.kind,
        "population": "finite",
        "estimand": f"mean {measure} over these {len(llm_per_query)} queries with LLM grades",
    }
    notes: list[str] = []
    if design.kind != "whole-queries" or not labelled:
        why: str | None = None  # said beside each run's estimate: why it has no interval
        if design.kind == "whole-queries":
            why = (
                f"LLM-only: none of the {partly} sampled queries is wholly graded by people, and "
                "a per-query measure needs every pair of a query graded; grade the rest of their "
                "pairs"
            )
            notes.append(f"per-run estimates are {why}")
        else:
            notes.append(
                "per-run estimates are LLM-only: a per-query measure needs the whole query "
                f"graded by people, and the human grades are {design.text} (draw the sample "
                "with `relgrade sample --strategy whole-queries`)"
            )
        return {
            name: Estimate.model_validate(
                {
                    "llm_only": float(f.mean()) if len(f) else None,
                    "human_only": None,
                    "ppi": None,
                    "ppi_ci": None,
                    "human_only_ci": None,
                    "n_labelled": 0,
                    "n_unlabelled": len(f),
                    "caution": why,
                    **common,
                }
            )
            for name, f in ((n, scorer(llm, r, measure)) for n, r in runs.items())
        }, notes
    left_out = _left_out(partly)
    notes.extend([left_out] if left_out else [])
    query_weights = _query_weights(paired, weights, labelled)
    few = len(labelled) < FEW_QUERIES  # PPI++ would cover less than human-only (module docstring)
    frame = paired.frame[paired.frame["query_id"].isin(labelled)]
    human_qrels = frame[["query_id", "doc_id", "human"]].rename(columns={"human": "grade"})
    out: dict[str, Estimate] = {}
    for name, run in runs.items():
        f_all = scorer(llm, run, measure)
        est = ppi_mean(
            scorer(human_qrels, run, measure).reindex(labelled).to_numpy(),
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
    return out, notes
