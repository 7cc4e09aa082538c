"""The rows and sentences both report writers show: the terminal tables and the HTML page."""

from __future__ import annotations

from typing import Any

from calibration.summary_model import (
    BiasRow,
    CalibrationSummary,
    Confidence,
    DesignSample,
    Estimate,
    Estimates,
    HumanVsHuman,
    QueryFigures,
    Systems,
)
from grader.models import GRADES

AGREEMENT_ROWS: tuple[tuple[str, str], ...] = (
    ("exact_agreement", "exact agreement"),
    ("within_one", "within one grade"),
    ("cohen_kappa", "Cohen's kappa"),
    ("weighted_kappa_linear", "kappa, linear weights"),
    ("weighted_kappa_quadratic", "kappa, quadratic weights"),
    ("krippendorff_alpha_ordinal", "Krippendorff's alpha, ordinal"),
    ("krippendorff_alpha_interval", "Krippendorff's alpha, interval"),
    ("mean_bias", "mean bias (LLM - human)"),
)
WEIGHTED_CELLS = "cells: estimated pairs (weighted by the sample manifest, 1/pi)"
CI_HEADER = "95% CI (queries resampled)"
QUERY_HEADERS = ["query", "n", "exact", "kappa", "quadratic kappa", "bias"]
SYSTEM_HEADERS = ["run", "human", "LLM", "human rank", "LLM rank", "change"]
CONFIDENCE_HEADERS = ["quintile", "n", "mean confidence", "exact agreement"]
ESTIMATE_HEADERS = ["quantity", "LLM only", "human only", "PPI++", "95% CI", "labelled"]
BINARY_ROWS = ("0 (not relevant)", "1 (relevant)")


def fmt(value: Any, digits: int = 4) -> str:
    """A number for a table cell; None prints as n/a."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        text = f"{value:.{digits}f}"
        return text[1:] if text.startswith("-") and float(text) == 0 else text  # no "-0.000"
    return str(value)


def ci(interval: list[float | None] | None) -> str:
    """`[low, high]`, or "" when either end is undefined."""
    if not interval or interval[0] is None or interval[1] is None:
        return ""
    return f"[{interval[0]:.4f}, {interval[1]:.4f}]"


def cells_note(s: CalibrationSummary) -> str:
    """`; cells: estimated pairs (weighted ...)` for a weighted summary, else ""."""
    return f"; {WEIGHTED_CELLS}" if s.weighted else ""


def agreement_rows(s: CalibrationSummary) -> list[tuple[str, str, float | None, str]]:
    """(id, label, value, interval) of each agreement figure, binary kappas last."""
    rows = [(k, label, s.figure(k), ci(s.intervals.get(k))) for k, label in AGREEMENT_ROWS]
    for t, value in s.binary_kappa.by_threshold():
        key, split = f"binary_kappa_{t}", f"{'0123'[:t]}|{'0123'[t:]}"
        rows.append((key, f"binary kappa {split}", value, ci(s.intervals.get(key))))
    return rows


def confusion_rows(s: CalibrationSummary) -> list[list[str]]:
    """Rows human grade, columns LLM grade, then recall; a last row of precisions."""
    rows = [
        [str(g), *[fmt(v, 1) for v in row], fmt(s.per_grade[str(g)].recall, 3)]
        for g, row in enumerate(s.confusion)
    ]
    rows.append(["precision", *[fmt(s.per_grade[str(g)].precision, 3) for g in GRADES], ""])
    return rows


def _cells(record: Any, keys: tuple[str, ...], digits: int) -> list[str]:
    """The record's `keys` as table cells (numbers to `digits`)."""
    return [fmt(record[k], digits) for k in keys]


def bias_rows(rows: list[BiasRow], with_span: bool) -> list[list[str]]:
    """Bucket (with its span for lengths), n, both means and the bias."""
    return [
        [
            f"{r['bucket']} ({r['low']}-{r['high']})" if with_span else r["bucket"],
            *_cells(r, ("n", "human_mean", "llm_mean", "mean_bias"), 3),
        ]
        for r in rows
    ]


def system_rows(sy: Systems) -> list[list[str]]:
    """Each run's score under both label sets and its ranks."""
    keys = ("run", "human", "llm", "human_rank", "llm_rank")
    return [[*_cells(r, keys, 4), f"{r['rank_change']:+d}"] for r in sy.per_system]


def query_rows(per_query: list[QueryFigures]) -> list[list[str]]:
    """Agreement on each query's pairs."""
    keys = ("query_id", "n", "exact_agreement", "cohen_kappa", "weighted_kappa_quadratic")
    return [_cells(q, (*keys, "mean_bias"), 3) for q in per_query]


def confidence_rows(conf: Confidence) -> list[list[str]]:
    """Exact agreement per quintile of the judge's own confidence."""
    keys = ("bin", "n", "mean_confidence", "exact_agreement")
    return [_cells(r, keys, 3) for r in conf.by_confidence or []]


def binary_rows(s: CalibrationSummary) -> list[list[str]]:
    """The 2x2 table of binary human grades against the LLM's split."""
    assert s.binary_scale is not None
    rows = zip(BINARY_ROWS, s.binary_scale.confusion, strict=True)
    return [[label, *[fmt(v, 1) for v in row]] for label, row in rows]


def estimate_cells(label: str, e: Estimate) -> list[str]:
    """One estimate's row: LLM-only, human-only, PPI++, its interval, labelled / all."""
    labelled = f"{e.n_labelled} / {e.n_labelled + e.n_unlabelled}"
    return [label, fmt(e.llm_only), fmt(e.human_only), fmt(e.ppi), ci(e.ppi_ci), labelled]


def estimate_rows(est: Estimates, short: bool = False) -> list[tuple[str, Estimate]]:
    """(label, estimate) for the relevant share and each run, in the order shown."""
    share = f"(>={est.threshold})" if short else f"(grade >= {est.threshold})"
    rows = [(f"relevant share {share}", est.relevant_share)]
    if est.mean_grade is not None:
        rows.append(("mean grade (0-3)", est.mean_grade))
    by_measure = est.runs_by_measure or {"": est.runs or {}}
    rows += [(f"{name} {e.measure}", e) for runs in by_measure.values() for name, e in runs.items()]
    return rows


def estimates_caption(est: Estimates) -> str:
    """One paragraph: the sample design, what each estimate estimates, and the quantile."""
    share = est.relevant_share
    parts = [f"Design: {est.design.text}."]
    parts.append(f"Relevant share: the {share.estimand} ({share.interval or 'normal'} interval).")
    said = sequence_sentence(share)
    if said:
        parts.append(said)
    grade = est.mean_grade
    if grade is not None:
        bias = f"; the pool's mean bias (LLM minus human) {fmt(grade.mean_bias)}"
        parts.append(f"Mean grade: the {grade.estimand}{bias} {ci(grade.mean_bias_ci)}.")
    runs = list((est.runs or {}).values())
    if runs and runs[0].estimand:
        parts.append(f"Runs: the {runs[0].estimand}.")
    return " ".join(parts)


def sequence_sentence(share: Estimate) -> str | None:
    """The relevant share's confidence sequence in words, or why there is none (or None)."""
    if share.cs is None or share.cs_n is None:
        return share.cs_note
    low, high = share.cs
    half = ((high or 0.0) - (low or 0.0)) / 2
    more = share.more_for_0_05 or 0
    if more:
        stop = f"about {more} more grades for +-0.05"
    elif half <= 0.05:
        stop = "half-width 0.05 reached"
    else:  # more_for_0_05 is capped at the pairs left, and none is left
        stop = "no pair left to grade: +-0.05 is out of the sequence's reach"
    text = (
        f"Anytime-valid 95% confidence sequence after the first {share.cs_n} graded pairs of "
        f"the sample's order: {fmt(low)} to {fmt(high)} (estimate {fmt(share.cs_estimate)}, "
        f"half-width {half:.3f}; {stop})."
    )
    return text + (f" {share.cs_note}." if share.cs_note else "")


def design_sample_sentence(d: DesignSample) -> str:
    """The design sample's figures in words, when agreement counted more pairs than it."""
    return (
        f"Design sample: {d.n} pairs of the manifest ({d.strategy}), weighted by 1/pi to the "
        f"{d.population:,} pairs it was drawn from: exact agreement {fmt(d.exact_agreement)}, "
        f"Cohen's kappa {fmt(d.cohen_kappa)}, quadratic-weighted kappa "
        f"{fmt(d.weighted_kappa_quadratic)}, mean bias {fmt(d.mean_bias)}. The agreement above "
        f"also counts {d.outside} pairs graded by both outside the manifest, unweighted."
    )


def human_vs_human_rows(hh: HumanVsHuman) -> list[list[str]]:
    """(figure, human B vs human A, LLM vs human A); each mean bias in its own column."""
    rows = [
        [label, fmt(hh.humans[key]), fmt(hh.llm[key])]
        for key, label in AGREEMENT_ROWS
        if key in type(hh.humans).model_fields and key != "mean_bias"
    ]
    rows.append(["mean bias (human B - human A)", fmt(hh.humans.mean_bias), ""])
    rows.append(["mean bias (LLM - human A)", "", fmt(hh.llm.mean_bias)])
    return rows


def human_vs_human_title(hh: HumanVsHuman) -> str:
    """What the human-vs-human table compares, and whether it is weighted."""
    weighted = " (weighted by the sample manifest, as above)" if hh.weighted else ""
    return f"Human vs human beside LLM vs human, on the {hh.n} pairs all three graded{weighted}"
