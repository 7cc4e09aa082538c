"""The calibration summary as rich tables, for people reading a terminal (the CLI prints them)."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

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


def fmt(value: Any, digits: int = 4) -> str:
    """A number for a table cell; None prints as n/a."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        text = f"{value:.{digits}f}"
        return text[1:] if text.startswith("-") and float(text) == 0 else text  # no "-0.000"
    return str(value)


def _ci(ci: list[float | None] | None) -> str:
    if not ci or ci[0] is None or ci[1] is None:
        return ""
    return f"[{ci[0]:.4f}, {ci[1]:.4f}]"


def agreement_table(s: CalibrationSummary) -> Table:
    """The headline figures with their 95% query-bootstrap intervals."""
    weighted = " (weighted by the sample manifest)" if s.weighted else ""
    c = s.counts
    title = (
        f"Agreement on {s.n} pairs over {c.queries} queries{weighted}; "
        f"{c.llm_only} pairs LLM-only, {c.human_only} human-only"
    )
    if c.design_sample is not None:
        title += f"; design sample: {c.design_sample} pairs of the manifest"
    table = Table(title=title, title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("95% CI (queries resampled)", justify="right", no_wrap=True)
    intervals = s.intervals
    for key, label in AGREEMENT_ROWS:
        table.add_row(label, fmt(s.figure(key)), _ci(intervals.get(key)))
    for t, value in s.binary_kappa.by_threshold():
        split = f"{'|'.join(['0123'[:t], '0123'[t:]])}"
        table.add_row(f"binary kappa {split}", fmt(value), _ci(intervals.get(f"binary_kappa_{t}")))
    return table


WEIGHTED_CELLS = "cells: estimated pairs (weighted by the sample manifest, 1/pi)"
"""What a weighted confusion matrix's cells are: scaled counts, not pairs graded."""


def cells_note(s: CalibrationSummary) -> str:
    """`; cells: estimated pairs (weighted ...)` for a weighted summary, else ""."""
    return f"; {WEIGHTED_CELLS}" if s.weighted else ""


def confusion_table(s: CalibrationSummary) -> Table:
    """Rows human grade, columns LLM grade, with per-grade precision and recall."""
    ref = " on the 0..3 scale, for reference only: human grades are 0/1" if s.binary_scale else ""
    title = f"Confusion (rows human, columns LLM{cells_note(s)}){ref}"
    table = Table(title=title, title_justify="left")
    table.add_column("human \\ LLM")
    for g in GRADES:
        table.add_column(str(g), justify="right")
    table.add_column("recall", justify="right")
    for g, row in enumerate(s.confusion):
        recall = s.per_grade[str(g)].recall
        table.add_row(str(g), *[fmt(v, 1) for v in row], fmt(recall, 3))
    table.add_row("precision", *[fmt(s.per_grade[str(g)].precision, 3) for g in GRADES], "")
    return table


def distribution_table(s: CalibrationSummary) -> Table:
    """The two grade distributions side by side."""
    d = s.distributions
    table = Table(title="Grade distributions", title_justify="left")
    table.add_column("grade")
    table.add_column("human", justify="right")
    table.add_column("LLM", justify="right")
    for g in d["grades"]:
        table.add_row(str(g), f"{d['human'][g]:.1%}", f"{d['llm'][g]:.1%}")
    return table


def bias_table(rows: list[BiasRow], title: str, what: str) -> Table:
    """Mean bias per bucket (length quintile or rank range)."""
    table = Table(title=title, title_justify="left")
    for name in (what, "n", "human mean", "LLM mean", "bias"):
        table.add_column(name, justify="right" if name != what else "left")
    for r in rows:
        span = f"{r['bucket']} ({r['low']}-{r['high']})" if what == "length" else r["bucket"]
        table.add_row(
            span,
            str(r["n"]),
            fmt(r["human_mean"], 3),
            fmt(r["llm_mean"], 3),
            fmt(r["mean_bias"], 3),
        )
    return table


def systems_table(sy: Systems) -> Table:
    """Each run's score under both label sets and its ranks."""
    iv = sy.intervals
    title = (
        f"Systems by {sy.measure}, scored on the {sy.pool} only (`evaluate` on the whole "
        f"human file scores all its pairs): Kendall tau {fmt(sy.kendall_tau)} "
        f"{_ci(iv.get('kendall_tau'))}, Spearman rho {fmt(sy.spearman_rho)} "
        f"{_ci(iv.get('spearman_rho'))}, tau_AP {fmt(sy.tau_ap)} {_ci(iv.get('tau_ap'))}"
    )
    table = Table(title=title, title_justify="left")
    for name in ("run", "human", "LLM", "human rank", "LLM rank", "change"):
        table.add_column(name, justify="left" if name == "run" else "right")
    for r in sy.per_system:
        table.add_row(
            r["run"],
            fmt(r["human"]),
            fmt(r["llm"]),
            str(r["human_rank"]),
            str(r["llm_rank"]),
            f"{r['rank_change']:+d}",
        )
    return table


def estimates_table(est: Estimates) -> Table:
    """LLM-only, human-only and PPI++ estimates with the PPI++ 95% interval; the caption names
    the sample design and each estimand, and a mark next to an interval that could mislead
    points to its caution."""
    rows = estimate_rows(est, short=True)
    cautions = [(label, e.caution) for label, e in rows if e.caution]
    caption = estimates_caption(est) + "".join(
        f" ({i}) {label}: {text}." for i, (label, text) in enumerate(cautions, 1)
    )
    table = Table(
        title="Estimates (PPI++, 95% CI)",
        title_justify="left",
        caption=caption,
        caption_justify="left",
    )
    for name in ("quantity", "LLM only", "human only", "PPI++", "95% CI", "labelled"):
        if name == "quantity":
            table.add_column(name, ratio=1)
        else:
            table.add_column(name, justify="right", no_wrap=True)
    marks = {label: f"({i})" for i, (label, _) in enumerate(cautions, 1)}
    for label, e in rows:
        table.add_row(
            label,
            fmt(e.llm_only),
            fmt(e.human_only),
            fmt(e.ppi),
            " ".join(filter(None, (_ci(e.ppi_ci), marks.get(label)))),
            f"{e.n_labelled} / {e.n_labelled + e.n_unlabelled}",
        )
    return table


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
    parts.append(f"Relevant share: the {share.estimand}")
    parts[-1] += f" ({share.interval or 'normal'} interval)."
    said = sequence_sentence(share)
    if said:
        parts.append(said)
    grade = est.mean_grade
    if grade is not None:
        bias = f"; the pool's mean bias (LLM minus human) {fmt(grade.mean_bias)}"
        parts.append(f"Mean grade: the {grade.estimand}{bias} {_ci(grade.mean_bias_ci)}.")
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


def worst_queries_table(per_query: list[QueryFigures], k: int = 5) -> Table:
    """The k queries with the lowest exact agreement (most pairs first on ties, then in the
    per-query list's order)."""
    rows = sorted(
        (q for q in per_query if q["exact_agreement"] is not None),
        key=lambda q: (q["exact_agreement"] or 0.0, -q["n"]),
    )[:k]
    table = Table(title=f"The {len(rows)} queries with the lowest agreement", title_justify="left")
    for name in ("query", "n", "exact", "kappa", "quadratic kappa", "bias"):
        table.add_column(name, justify="left" if name == "query" else "right")
    for q in rows:
        table.add_row(
            str(q["query_id"]),
            str(q["n"]),
            fmt(q["exact_agreement"], 3),
            fmt(q["cohen_kappa"], 3),
            fmt(q["weighted_kappa_quadratic"], 3),
            fmt(q["mean_bias"], 3),
        )
    return table


def swaps_text(sy: Systems) -> Text:
    """The largest rank swaps in words."""
    if not sy.largest_swaps:
        return Text("No run changes rank between human and LLM labels.")
    moves = [f"{r['run']} {r['human_rank']} -> {r['llm_rank']}" for r in sy.largest_swaps]
    return Text("Largest rank swaps (human rank -> LLM rank): " + "; ".join(moves))


def confidence_table(conf: Confidence) -> Table:
    """Exact agreement per quintile of the judge's own confidence."""
    ece = fmt(conf.expected_calibration_error, 3)
    table = Table(
        title=f"Judge confidence vs agreement (expected calibration error {ece})",
        title_justify="left",
    )
    for name in ("quintile", "n", "mean confidence", "exact agreement"):
        table.add_column(name, justify="right")
    for r in conf.by_confidence or []:
        table.add_row(
            str(r["bin"]), str(r["n"]), fmt(r["mean_confidence"], 3), fmt(r["exact_agreement"], 3)
        )
    return table


def human_vs_human_rows(hh: HumanVsHuman) -> list[tuple[str, str, str]]:
    """(figure, human B vs human A, LLM vs human A) cells; each mean bias sits in its own
    column under a label that names its direction (B - A; LLM - A)."""
    rows = [
        (label, fmt(hh.humans[key]), fmt(hh.llm[key]))
        for key, label in AGREEMENT_ROWS
        if key in type(hh.humans).model_fields and key != "mean_bias"
    ]
    rows.append(("mean bias (human B - human A)", fmt(hh.humans.mean_bias), ""))
    rows.append(("mean bias (LLM - human A)", "", fmt(hh.llm.mean_bias)))
    return rows


def human_vs_human_title(hh: HumanVsHuman) -> str:
    """What the human-vs-human table compares, and whether it is weighted."""
    weighted = " (weighted by the sample manifest, as above)" if hh.weighted else ""
    return f"Human vs human beside LLM vs human, on the {hh.n} pairs all three graded{weighted}"


def human_vs_human_table(hh: HumanVsHuman) -> Table:
    """Two people against each other, and the LLM against the first person, on the same pairs."""
    table = Table(title=human_vs_human_title(hh), title_justify="left")
    table.add_column("figure")
    table.add_column("human B vs human A", justify="right")
    table.add_column("LLM vs human A", justify="right")
    for row in human_vs_human_rows(hh):
        table.add_row(*row)
    return table


def binary_scale_table(s: CalibrationSummary) -> Table:
    """Binary human grades against the LLM's at the matching split: the 2x2 table and figures."""
    b = s.binary_scale
    if b is None:
        raise ValueError("the summary has no binary comparison (people did not grade 0/1)")
    iv = b.intervals
    t = b.threshold
    table = Table(
        title=f"Binary comparison ({b.split}{cells_note(s)}): exact agreement "
        f"{fmt(b.exact_agreement)} {_ci(iv.get('exact_agreement'))}, Cohen's kappa "
        f"{fmt(b.cohen_kappa)} {_ci(iv.get('cohen_kappa'))}",
        title_justify="left",
    )
    table.add_column("human \\ LLM")
    table.add_column(f"not relevant (< {t})", justify="right")
    table.add_column(f"relevant (>= {t})", justify="right")
    for label, row in zip(("0 (not relevant)", "1 (relevant)"), b.confusion, strict=True):
        table.add_row(label, *[fmt(v, 1) for v in row])
    shares = f"{fmt(b.human_relevant, 3)} / {fmt(b.llm_relevant, 3)}"
    table.add_row("relevant share (human / LLM)", shares, "")
    return table


def render(s: CalibrationSummary) -> RenderableType:
    """Every table of a summary, in reading order, then the verdict and notes. When people
    graded 0/1 against the LLM's 0..3, the binary comparison comes first, with the reason."""
    parts: list[RenderableType] = []
    if s.binary_scale:
        parts.append(binary_scale_table(s))
        parts.append(
            Text(
                "First because the scales differ: people graded 0/1, the LLM 0..3. The 0..3 "
                "tables below set a human 1 (relevant) beside an LLM 1 (related); they are kept "
                "for reference only.",
                style="bold",
            )
        )
    parts += [agreement_table(s), confusion_table(s), distribution_table(s)]
    if s.human_vs_human:
        parts.append(human_vs_human_table(s.human_vs_human))
    if len(s.per_query) > 1:
        parts.append(worst_queries_table(s.per_query))
    if s.confidence and s.confidence.by_confidence:
        parts.append(confidence_table(s.confidence))
    if s.bias_by_length:
        parts.append(bias_table(s.bias_by_length, "Mean bias by document length", "length"))
    if s.bias_by_rank:
        parts.append(bias_table(s.bias_by_rank, "Mean bias by best rank in the runs", "rank"))
    for sy in (s.systems_by_measure or {}).values() or ([s.systems] if s.systems else []):
        if sy.left_out:  # a pair sample ranks no system: say why instead of a verdict
            parts.append(Text(f"System ranking by {sy.measure} {sy.left_out}."))
            continue
        parts.append(systems_table(sy))
        parts.append(swaps_text(sy))
    if s.estimates:
        parts.append(estimates_table(s.estimates))
    if s.design_sample and s.design_sample.outside:
        parts.append(Text(design_sample_sentence(s.design_sample)))
    parts.append(Text(f"Verdict: {s.verdict.text}", style="bold"))
    for note in s.notes:
        parts.append(Text(f"note: {note}", style="dim"))
    return Group(*parts)
