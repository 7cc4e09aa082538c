"""Everything `relgrade calibrate` reports, as one `CalibrationSummary` (calibration.summary_model).
System scores use the pairs graded by both for both label sets, so a change in ranking is the
labels' doing; a sample of scattered pairs ranks no system (`systems.left_out` says why)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from calibration.estimates_section import estimates_section, per_query_scores
from calibration.join import PairedGrades, pair_grades
from calibration.spotcheck.stopping import DrawOrder
from calibration.stats.agreement import (
    DEFAULT_RESAMPLES,
    K,
    agreement,
    agreement_intervals,
    scalar_figures,
    to_float,
)
from calibration.stats.bias import (
    bias_by_length,
    bias_by_rank,
    binary_comparison,
    confidence_report,
    grade_distributions,
    is_binary_against_graded,
    scale_warning,
    scales_verdict,
    spread_sentences,
    verdict,
)
from calibration.stats.ppi import SampleDesign, infer_design
from calibration.stats.systems import compare_systems, rank_agreement_intervals
from calibration.summary_model import BinaryScale, CalibrationSummary, Verdict
from grader.metrics.evaluate import exact_mean
from grader.metrics.kappa import grouped_confusion
from grader.metrics.rank_order import query_order

DEFAULT_MEASURE = "nDCG@10"
DEFAULT_THRESHOLD = 2
POOL = "pairs graded on both sides"
"""The pool both label sets score the runs on (`systems.pool`)."""


def _qrels(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    return frame[["query_id", "doc_id", column]].rename(columns={column: "grade"})


def _per_query(queries: list[str], codes: npt.NDArray[np.int64], mats: Any) -> list[Any]:
    """Agreement on each query's pairs, from its confusion matrix (`mats[i]`)."""
    figs = scalar_figures(mats)
    keys = ("exact_agreement", "cohen_kappa", "weighted_kappa_quadratic", "mean_bias")
    counts = np.bincount(codes, minlength=len(queries))
    return [  # listed in the order evaluate lists queries (numeric ids by number)
        {"query_id": queries[i], "n": int(counts[i]), **{k: to_float(figs[k][i]) for k in keys}}
        for i in query_order(queries)
    ]


def _best_ranks(paired: PairedGrades, runs: Mapping[str, pd.DataFrame]) -> npt.NDArray[np.float64]:
    stacked = pd.concat([r[["query_id", "doc_id", "rank"]] for r in runs.values()])
    best = stacked.groupby(["query_id", "doc_id"])["rank"].min()
    keys = pd.MultiIndex.from_frame(paired.frame[["query_id", "doc_id"]])
    return best.reindex(keys).to_numpy(dtype=np.float64)


def _systems(
    f: pd.DataFrame, runs: Mapping[str, pd.DataFrame], measure: str, n_bootstrap: int, seed: int
) -> dict[str, Any]:
    """Every run scored on the paired pool under both label sets, compared, with intervals."""
    human_q, llm_q = _qrels(f, "human"), _qrels(f, "llm")
    names = list(runs)
    h = pd.DataFrame({n: per_query_scores(human_q, runs[n], measure) for n in names})
    m = pd.DataFrame({n: per_query_scores(llm_q, runs[n], measure) for n in names})
    m = m.reindex(h.index)
    h_means = {n: exact_mean(h[n]) for n in names}
    table = compare_systems(h_means, {n: exact_mean(m[n]) for n in names})
    table["intervals"] = rank_agreement_intervals(
        h.to_numpy(), m.to_numpy(), names, n_bootstrap, seed
    )
    return {"measure": measure, "pool": POOL, **table}


def _systems_left_out(
    paired: PairedGrades, runs: Mapping[str, pd.DataFrame], measure: str, design: SampleDesign
) -> dict[str, Any]:
    """The systems section of a pair sample: no ranking, and why (as the per-run estimates)."""
    why = (
        f"left out: {measure} is a per-query measure and needs every pair of a query graded by "
        f"people, but the human grades are {design.text}; the {paired.n} pairs graded on both "
        "sides rank no system (draw the sample with `relgrade sample --strategy whole-queries` "
        "to compare rankings)"
    )
    empty = {"per_system": [], "largest_swaps": [], "intervals": {}, "left_out": why}
    none = dict.fromkeys(("kendall_tau", "spearman_rho", "tau_ap"))
    return {"measure": measure, "pool": POOL, "n_systems": len(runs), **none, **empty}


def summarize(
    llm: pd.DataFrame,
    human: pd.DataFrame,
    *,
    runs: Mapping[str, pd.DataFrame] | None = None,
    measures: Sequence[str] = (DEFAULT_MEASURE,),
    doc_lengths: Mapping[str, int] | None = None,
    weights: npt.NDArray[np.float64] | None = None,
    seed: int = 0,
    n_bootstrap: int = DEFAULT_RESAMPLES,
    threshold: int = DEFAULT_THRESHOLD,
    paired: PairedGrades | None = None,
    design: SampleDesign | None = None,
    order: DrawOrder | None = None,
    human_scale: str | None = None,
) -> CalibrationSummary:
    """The calibration of `llm` grades against `human` grades (frames query_id, doc_id, grade).
    `weights`: one per pair of `paired`; `design`, `human_scale` ("0-3", "binary"): None infers
    them; `order`: a sequential sample's; the first of `measures` is that of `systems`."""
    asked = list(dict.fromkeys(measures)) or [DEFAULT_MEASURE]
    paired = paired if paired is not None else pair_grades(llm, human)
    f = paired.frame
    figures = _figures(paired, weights, n_bootstrap, seed)
    judged, binary_scale = _verdict(
        paired, figures, weights, threshold, human_scale, n_bootstrap, seed
    )
    notes: list[str] = []
    sections = _confidence(f)  # the sections that exist only with their inputs
    sections["bias_by_length"] = _bias_by_length(f, doc_lengths, weights, notes)
    if paired.llm_only == 0:  # people graded every pair: no sample design, no estimates
        design = None
    elif design is None:
        design = infer_design(paired)
    if runs:
        sections.update(
            _run_sections(paired, runs, asked, design, weights, n_bootstrap, seed, notes)
        )
    if binary_scale is None:  # a bias across scales says nothing
        judged.text += spread_sentences(sections["bias_by_length"], sections.get("bias_by_rank"))
    if design is not None:
        binary = binary_scale is not None
        sections["estimates"], said = estimates_section(
            paired, design, weights, threshold, runs, asked, order=order, binary=binary
        )
        notes.extend(said)
    return CalibrationSummary.model_validate(
        {
            **figures,
            "threshold": threshold,
            "verdict": judged,
            "binary_scale": binary_scale,
            "warnings": [] if binary_scale is None else [scale_warning(threshold, bool(runs))],
            "notes": notes,
            **sections,
        }
    )


def _figures(
    paired: PairedGrades, weights: npt.NDArray[np.float64] | None, n_bootstrap: int, seed: int
) -> dict[str, Any]:
    """The agreement figures, their query-bootstrap intervals, counts and distributions."""
    h, m = paired.frame["human"].to_numpy(), paired.frame["llm"].to_numpy()
    queries, codes = paired.query_index()
    per_query_mats = grouped_confusion(codes, len(queries), h, m, K, weights)
    counts = {"paired": paired.n, "llm_only": paired.llm_only, "human_only": paired.human_only}
    return {
        **agreement(h, m, weights),
        "intervals": agreement_intervals(per_query_mats, n_bootstrap, seed),
        "bootstrap": {"resamples": n_bootstrap, "seed": seed, "unit": "query"},
        "counts": {**counts, "queries": len(queries)},
        "per_query": _per_query(queries, codes, per_query_mats),
        "distributions": grade_distributions(h, m, weights),
    }


def _verdict(
    paired: PairedGrades,
    figures: dict[str, Any],
    weights: npt.NDArray[np.float64] | None,
    threshold: int,
    human_scale: str | None,
    n_bootstrap: int,
    seed: int,
) -> tuple[Verdict, BinaryScale | None]:
    """The verdict, and the binary comparison when people graded 0/1 (`human_scale`, or
    inferred), whose verdict it is then."""
    f = paired.frame
    h, m = f["human"].to_numpy(), f["llm"].to_numpy()
    human_rel = float(np.average(h >= threshold, weights=weights))
    llm_rel = float(np.average(m >= threshold, weights=weights))
    bias_ci = figures["intervals"].get("mean_bias")
    judged = Verdict.model_validate(
        verdict(figures["mean_bias"], bias_ci, human_rel, llm_rel, threshold)
    )
    binary_human = human_scale == "binary"
    if human_scale is None:  # inferred: people graded 0/1
        binary_human = is_binary_against_graded(paired.human["grade"], m)
    if not binary_human:
        return judged, None
    queries, codes = paired.query_index()
    binary = binary_comparison(
        h,
        m,
        threshold,
        weights=weights,
        query_codes=codes,
        n_queries=len(queries),
        n_bootstrap=n_bootstrap,
        seed=seed,
    )
    return Verdict.model_validate(scales_verdict(binary)), BinaryScale.model_validate(binary)


def _confidence(f: pd.DataFrame) -> dict[str, Any]:
    """The confidence section, when the LLM's grades have confidences or expected grades."""
    if "confidence" not in f.columns and "expected_grade" not in f.columns:
        return {}
    report = confidence_report(
        f["human"].to_numpy(),
        f["llm"].to_numpy(),
        f["confidence"].to_numpy() if "confidence" in f.columns else None,
        f["expected_grade"].to_numpy() if "expected_grade" in f.columns else None,
    )
    return {"confidence": report}


def _bias_by_length(
    f: pd.DataFrame,
    doc_lengths: Mapping[str, int] | None,
    weights: npt.NDArray[np.float64] | None,
    notes: list[str],
) -> list[dict[str, Any]] | None:
    """Bias by document length (None without `doc_lengths`); what is left out goes to `notes`."""
    if doc_lengths is None:
        notes.append("bias by document length needs --docs (document texts); skipped")
        return None
    lengths = [doc_lengths.get(d, np.nan) for d in f["doc_id"]]
    by_length = bias_by_length(f["human"].to_numpy(), f["llm"].to_numpy(), lengths, weights)
    unknown = int(np.sum(np.isnan(np.asarray(lengths, dtype=np.float64))))
    if unknown:
        notes.append(f"{unknown} graded documents are not in --docs; left out of length bias")
    return by_length


def _run_sections(
    paired: PairedGrades,
    runs: Mapping[str, pd.DataFrame],
    asked: list[str],
    sample_design: SampleDesign | None,
    weights: npt.NDArray[np.float64] | None,
    n_bootstrap: int,
    seed: int,
    notes: list[str],
) -> dict[str, Any]:
    """The sections runs give: bias by rank, and the systems section of each measure asked
    (the first is `systems`); for a sample of scattered pairs the systems are left out."""
    f = paired.frame
    pair_sample = sample_design is not None and sample_design.kind == "pairs"
    if weights is not None and not pair_sample:
        notes.append(
            "system scores are per-query measures over whole queries; "
            "the pair weights of the manifest do not apply to them"
        )
    by_rank = bias_by_rank(
        f["human"].to_numpy(), f["llm"].to_numpy(), _best_ranks(paired, runs), weights
    )
    if pair_sample:
        assert sample_design is not None
        by_measure = {m: _systems_left_out(paired, runs, m, sample_design) for m in asked}
    else:
        by_measure = {m: _systems(f, runs, m, n_bootstrap, seed) for m in asked}
    return {
        "bias_by_rank": by_rank,
        "systems": by_measure[asked[0]],
        "systems_by_measure": by_measure,
    }
