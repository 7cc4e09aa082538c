"""The calibration summary as rich tables, for people reading a terminal (the CLI prints them)."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from calibration.report import cells
from calibration.report.cells import ci, fmt
from calibration.summary_model import (
    BiasRow,
    CalibrationSummary,
    Confidence,
    Estimates,
    HumanVsHuman,
    QueryFigures,
    Systems,
)
from grader.models import GRADES


def _table(
    title: str, headers: list[str], rows: list[list[str]], caption: str | None = None, **first: Any
) -> Table:
    """A table whose first column is text (`first`: its options) and the others numbers."""
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    table.add_column(headers[0], **first)
    for name in headers[1:]:
        table.add_column(name, justify="right", no_wrap=True)
    for row in rows:
        table.add_row(*row)
    return table


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
    rows = [[label, fmt(value), interval] for _, label, value, interval in cells.agreement_rows(s)]
    return _table(title, ["figure", "value", cells.CI_HEADER], rows)


def confusion_table(s: CalibrationSummary) -> Table:
    """Rows human grade, columns LLM grade, with per-grade precision and recall."""
    ref = " on the 0..3 scale, for reference only: human grades are 0/1" if s.binary_scale else ""
    title = f"Confusion (rows human, columns LLM{cells.cells_note(s)}){ref}"
    headers = ["human \\ LLM", *[str(g) for g in GRADES], "recall"]
    return _table(title, headers, cells.confusion_rows(s))


def distribution_table(s: CalibrationSummary) -> Table:
    """The two grade distributions side by side."""
    d = s.distributions
    rows = [[str(g), f"{d['human'][g]:.1%}", f"{d['llm'][g]:.1%}"] for g in d["grades"]]
    return _table("Grade distributions", ["grade", "human", "LLM"], rows)


def bias_table(rows: list[BiasRow], title: str, what: str) -> Table:
    """Mean bias per bucket (length quintile or rank range)."""
    headers = [what, "n", "human mean", "LLM mean", "bias"]
    return _table(title, headers, cells.bias_rows(rows, what == "length"))


def systems_table(sy: Systems) -> Table:
    """Each run's score under both label sets and its ranks."""
    iv = sy.intervals
    title = (
        f"Systems by {sy.measure}, scored on the {sy.pool} only (`evaluate` on the whole "
        f"human file scores all its pairs): Kendall tau {fmt(sy.kendall_tau)} "
        f"{ci(iv.get('kendall_tau'))}, Spearman rho {fmt(sy.spearman_rho)} "
        f"{ci(iv.get('spearman_rho'))}, tau_AP {fmt(sy.tau_ap)} {ci(iv.get('tau_ap'))}"
    )
    return _table(title, cells.SYSTEM_HEADERS, cells.system_rows(sy))


def estimates_table(est: Estimates) -> Table:
    """LLM-only, human-only and PPI++ estimates with the PPI++ 95% interval; a mark next to an
    interval that could mislead points to its caution in the caption."""
    rows = cells.estimate_rows(est, short=True)
    cautions = [(label, e.caution) for label, e in rows if e.caution]
    caption = cells.estimates_caption(est) + "".join(
        f" ({i}) {label}: {text}." for i, (label, text) in enumerate(cautions, 1)
    )
    marks = {label: f"({i})" for i, (label, _) in enumerate(cautions, 1)}
    shown = [cells.estimate_cells(label, e) for label, e in rows]
    for (label, _), row in zip(rows, shown, strict=True):
        row[4] = " ".join(filter(None, (row[4], marks.get(label))))
    return _table("Estimates (PPI++, 95% CI)", cells.ESTIMATE_HEADERS, shown, caption, ratio=1)


def worst_queries_table(per_query: list[QueryFigures], k: int = 5) -> Table:
    """The k queries with the lowest exact agreement (most pairs first on ties, then in the
    per-query list's order)."""
    rows = sorted(
        (q for q in per_query if q["exact_agreement"] is not None),
        key=lambda q: (q["exact_agreement"] or 0.0, -q["n"]),
    )[:k]
    title = f"The {len(rows)} queries with the lowest agreement"
    return _table(title, cells.QUERY_HEADERS, cells.query_rows(rows))


def swaps_text(sy: Systems) -> Text:
    """The largest rank swaps in words."""
    if not sy.largest_swaps:
        return Text("No run changes rank between human and LLM labels.")
    moves = [f"{r['run']} {r['human_rank']} -> {r['llm_rank']}" for r in sy.largest_swaps]
    return Text("Largest rank swaps (human rank -> LLM rank): " + "; ".join(moves))


def confidence_table(conf: Confidence) -> Table:
    """Exact agreement per quintile of the judge's own confidence."""
    ece = fmt(conf.expected_calibration_error, 3)
    title = f"Judge confidence vs agreement (expected calibration error {ece})"
    return _table(title, cells.CONFIDENCE_HEADERS, cells.confidence_rows(conf))


def human_vs_human_table(hh: HumanVsHuman) -> Table:
    """Two people against each other, and the LLM against the first person, on the same pairs."""
    headers = ["figure", "human B vs human A", "LLM vs human A"]
    return _table(cells.human_vs_human_title(hh), headers, cells.human_vs_human_rows(hh))


def binary_scale_table(s: CalibrationSummary) -> Table:
    """Binary human grades against the LLM's at the matching split: the 2x2 table and figures."""
    b = s.binary_scale
    if b is None:
        raise ValueError("the summary has no binary comparison (people did not grade 0/1)")
    iv, t = b.intervals, b.threshold
    title = (
        f"Binary comparison ({b.split}{cells.cells_note(s)}): exact agreement "
        f"{fmt(b.exact_agreement)} {ci(iv.get('exact_agreement'))}, Cohen's kappa "
        f"{fmt(b.cohen_kappa)} {ci(iv.get('cohen_kappa'))}"
    )
    shares = f"{fmt(b.human_relevant, 3)} / {fmt(b.llm_relevant, 3)}"
    rows = [*cells.binary_rows(s), ["relevant share (human / LLM)", shares, ""]]
    headers = ["human \\ LLM", f"not relevant (< {t})", f"relevant (>= {t})"]
    return _table(title, headers, rows)


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
        parts.append(Text(cells.design_sample_sentence(s.design_sample)))
    parts.append(Text(f"Verdict: {s.verdict.text}", style="bold"))
    for note in s.notes:
        parts.append(Text(f"note: {note}", style="dim"))
    return Group(*parts)
