"""Everything `relgrade calibrate` reports, as one JSON-ready dict.

Ties the parts together: pairs graded on both sides -> agreement figures with query-bootstrap
intervals -> per-query agreement -> bias (distributions, length, rank, verdict) -> system ranking
under both label sets -> PPI++ estimates when people graded only part of the LLM-graded pairs.

Two choices worth knowing:
- System scores (the `systems` section) are computed on the same pool for both sides: the pairs
  graded by both. Only the labels differ, so a change in ranking is the labels' doing.
- The per-run estimates use whole queries as the labelled unit (see `calibration.estimates`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from calibration.agreement import agreement, grouped_confusion, scalar_figures, to_float
from calibration.bias import (
    bias_by_length,
    bias_by_rank,
    grade_distributions,
    spread_sentence,
    verdict,
)
from calibration.bootstrap import DEFAULT_RESAMPLES, agreement_intervals
from calibration.confidence import confidence_report
from calibration.estimates import ppi_mean
from calibration.pairs import PairedGrades, pair_grades
from calibration.systems import compare_systems, rank_agreement_intervals
from grader.metrics.query_order import query_order

DEFAULT_MEASURE = "nDCG@10"
DEFAULT_THRESHOLD = 2


def per_query_scores(qrels: pd.DataFrame, run: pd.DataFrame, measure: str) -> pd.Series:
    """One measure per judged query (queries absent from the run score 0), indexed by query_id."""
    from grader.metrics import evaluate, parse_measure  # only needed when runs are given

    long = evaluate(qrels, run, [parse_measure(measure)], missing="zero")
    long = long[long["query_id"].astype(str) != "all"]
    means: pd.Series = long.groupby(long["query_id"].astype(str))["value"].mean()
    return means.astype(np.float64)


def _qrels(frame: pd.DataFrame, column: str) -> pd.DataFrame:
    return frame[["query_id", "doc_id", column]].rename(columns={column: "grade"})


def _per_query(paired: PairedGrades, weights: npt.NDArray[np.float64] | None) -> list[Any]:
    queries, codes = paired.query_index()
    f = paired.frame
    mats = grouped_confusion(codes, len(queries), f["human"], f["llm"], weights)
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
    h_means = {n: float(h[n].mean()) for n in names}
    table = compare_systems(h_means, {n: float(m[n].mean()) for n in names})
    table["intervals"] = rank_agreement_intervals(
        h.to_numpy(), m.to_numpy(), names, n_bootstrap, seed
    )
    return {"measure": measure, "pool": "pairs graded on both sides", **table}


def _relevant_share(
    paired: PairedGrades, weights: npt.NDArray[np.float64] | None, threshold: int
) -> dict[str, Any]:
    both = paired.frame
    keys = set(zip(both["query_id"], both["doc_id"], strict=True))
    llm = paired.llm
    only = [k not in keys for k in zip(llm["query_id"], llm["doc_id"], strict=True)]
    y = (both["human"].to_numpy() >= threshold).astype(np.float64)
    f = (both["llm"].to_numpy() >= threshold).astype(np.float64)
    fu = (llm.loc[only, "grade"].to_numpy() >= threshold).astype(np.float64)
    est = ppi_mean(
        y,
        f,
        fu,
        weights=weights,
        groups=both["query_id"].to_numpy(),
        groups_unlabelled=llm.loc[only, "query_id"].to_numpy(),
        bounds=(0.0, 1.0),
    )
    return {**est.to_json(), "unit": "pair", "clustered_by": "query"}


def _run_estimates(
    paired: PairedGrades, runs: Mapping[str, pd.DataFrame], measure: str
) -> tuple[dict[str, Any], list[str]]:
    llm = paired.llm
    llm_per_query = llm.groupby("query_id").size()
    both_per_query = paired.frame.groupby("query_id").size()
    full = both_per_query.reindex(llm_per_query.index, fill_value=0) == llm_per_query
    labelled = sorted(str(q) for q in full[full].index)
    notes: list[str] = []
    if not labelled:
        notes.append(
            "per-run estimates are LLM-only: no query has all its LLM-graded pairs graded by "
            "people, and a per-query measure needs the whole query (draw the sample with "
            "`relgrade sample --strategy whole-queries`)"
        )
        unlabelled = {name: per_query_scores(llm, run, measure) for name, run in runs.items()}
        return {
            name: {
                "llm_only": float(f.mean()) if len(f) else None,
                "human_only": None,
                "ppi": None,
                "ppi_ci": None,
                "human_only_ci": None,
                "n_labelled": 0,
                "n_unlabelled": len(f),
                "measure": measure,
                "unit": "query",
            }
            for name, f in unlabelled.items()
        }, notes
    human_qrels = _qrels(paired.frame[paired.frame["query_id"].isin(labelled)], "human")
    out: dict[str, Any] = {}
    for name, run in runs.items():
        f_all = per_query_scores(llm, run, measure)
        y = per_query_scores(human_qrels, run, measure).reindex(labelled)
        f_lab = f_all.reindex(labelled)
        f_unl = f_all.drop(index=labelled, errors="ignore")
        est = ppi_mean(
            y.to_numpy(), f_lab.to_numpy(), f_unl.to_numpy(), bounds=(0.0, 1.0)
        ).to_json()  # every measure lies in [0, 1]
        est["measure"] = measure
        est["unit"] = "query"
        out[name] = est
    return out, notes


def summarize(
    llm: pd.DataFrame,
    human: pd.DataFrame,
    *,
    runs: Mapping[str, pd.DataFrame] | None = None,
    measure: str = DEFAULT_MEASURE,
    doc_lengths: Mapping[str, int] | None = None,
    weights: npt.NDArray[np.float64] | None = None,
    seed: int = 0,
    n_bootstrap: int = DEFAULT_RESAMPLES,
    threshold: int = DEFAULT_THRESHOLD,
    paired: PairedGrades | None = None,
) -> dict[str, Any]:
    """The calibration of `llm` grades against `human` grades (frames query_id, doc_id, grade).

    `weights` are per paired pair, in the order of `pair_grades(llm, human).frame`
    (pass `paired` to reuse that join). `runs` maps run names to `read_run` frames.
    """
    paired = paired if paired is not None else pair_grades(llm, human)
    f = paired.frame
    h, m = f["human"].to_numpy(), f["llm"].to_numpy()
    out: dict[str, Any] = agreement(h, m, weights)
    notes: list[str] = []
    queries, codes = paired.query_index()
    per_query_mats = grouped_confusion(codes, len(queries), h, m, weights)
    out["intervals"] = agreement_intervals(per_query_mats, n_bootstrap, seed)
    out["bootstrap"] = {"resamples": n_bootstrap, "seed": seed, "unit": "query"}
    out["counts"] = {
        "paired": paired.n,
        "llm_only": paired.llm_only,
        "human_only": paired.human_only,
        "queries": len(queries),
    }
    out["threshold"] = threshold
    out["per_query"] = _per_query(paired, weights)
    out["distributions"] = grade_distributions(h, m, weights)
    w = np.ones(len(h)) if weights is None else weights
    human_rel = float(np.average(h >= threshold, weights=w))
    llm_rel = float(np.average(m >= threshold, weights=w))
    out["verdict"] = verdict(
        out["mean_bias"], out["intervals"].get("mean_bias"), human_rel, llm_rel, threshold
    )
    if "confidence" in f.columns or "expected_grade" in f.columns:
        out["confidence"] = confidence_report(
            h,
            m,
            f["confidence"].to_numpy() if "confidence" in f.columns else None,
            f["expected_grade"].to_numpy() if "expected_grade" in f.columns else None,
        )
    if doc_lengths is not None:
        lengths = [doc_lengths.get(d, np.nan) for d in f["doc_id"]]
        out["bias_by_length"] = bias_by_length(h, m, lengths, weights)
        unknown = int(np.sum(np.isnan(np.asarray(lengths, dtype=np.float64))))
        if unknown:
            notes.append(f"{unknown} graded documents are not in --docs; left out of length bias")
    else:
        out["bias_by_length"] = None
        notes.append("bias by document length needs --docs (document texts); skipped")
    if runs and weights is not None:
        notes.append(
            "system scores and per-run estimates are per-query measures over whole queries; "
            "the pair weights of the manifest do not apply to them"
        )
    if runs:
        out["bias_by_rank"] = bias_by_rank(h, m, _best_ranks(paired, runs), weights)
        out["systems"] = _systems(f, runs, measure, n_bootstrap, seed)
    spreads = (
        ("bias_by_length", "document length", ""),
        ("bias_by_rank", "rank", "rank "),
    )
    for key, what, prefix in spreads:
        sentence = spread_sentence(out.get(key) or [], what, prefix)
        if sentence:
            out["verdict"]["text"] += " " + sentence
    if paired.llm_only > 0:
        estimates: dict[str, Any] = {
            "threshold": threshold,
            "relevant_share": _relevant_share(paired, weights, threshold),
        }
        if runs:
            estimates["runs"], run_notes = _run_estimates(paired, runs, measure)
            notes.extend(run_notes)
        out["estimates"] = estimates
    out["notes"] = notes
    return out
