"""The calibration report: one self-contained HTML file with pictures and the numbers in tables.

The page skeleton is `templates/calibration.html` (see `calibration.report.page`); this module
builds the sections it holds, escaping every dynamic text. Pictures are inline SVG (see
`calibration.report.plots`); there is no script, stylesheet, font or image from elsewhere, so the
file opens offline, can be mailed, and shows the same in every browser.
Key figures carry stable ids (e.g. `id="cohen_kappa"`) so tests and scripts can read them.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

from calibration.report.page import Markup, fill, stylesheet, template
from calibration.report.plots import bias_svg, confusion_svg, distributions_svg, systems_svg
from calibration.report.terminal import (
    AGREEMENT_ROWS,
    cells_note,
    design_sample_sentence,
    estimate_rows,
    estimates_caption,
    fmt,
    human_vs_human_rows,
    human_vs_human_title,
)
from calibration.summary_model import (
    BiasRow,
    CalibrationSummary,
    Confidence,
    Estimates,
    HumanVsHuman,
    Systems,
)
from grader.io.files import atomic_write

CSS = stylesheet()
"""The reports' stylesheet (templates/report.css)."""


def _e(value: Any) -> str:
    return html.escape(str(value))


def _ci(ci: list[float | None] | None) -> str:
    if not ci or ci[0] is None or ci[1] is None:
        return ""
    return f"[{ci[0]:.4f}, {ci[1]:.4f}]"


def _table(headers: list[str], rows: list[list[str]], table_id: str, caption: str = "") -> Markup:
    """A table; `rows` hold cells that are HTML already (numbers, or text passed through _e)."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    cap = f"<caption>{_e(caption)}</caption>" if caption else ""
    return Markup(
        f'<table id="{table_id}">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    )


def _figure(svg: str, figure_id: str, caption: str) -> Markup:
    return Markup(f'<figure id="{figure_id}">{svg}<figcaption>{_e(caption)}</figcaption></figure>')


def _agreement(s: CalibrationSummary) -> Markup:
    intervals = s.intervals
    rows = [
        [_e(label), f'<span id="{key}">{fmt(s.figure(key))}</span>', _ci(intervals.get(key))]
        for key, label in AGREEMENT_ROWS
    ]
    for t, value in s.binary_kappa.by_threshold():
        split = "0123"[:t] + "|" + "0123"[t:]
        rows.append(
            [
                f"binary kappa {split}",
                f'<span id="binary_kappa_{t}">{fmt(value)}</span>',
                _ci(intervals.get(f"binary_kappa_{t}")),
            ]
        )
    return _table(["figure", "value", "95% CI (queries resampled)"], rows, "agreement")


def _binary_scale(s: CalibrationSummary) -> Markup:
    """People graded 0/1, the LLM 0..3: the warning and the comparison at the matching split."""
    b = s.binary_scale
    if not b:
        return Markup("")
    iv = b.intervals
    t = b.threshold
    warnings = "".join(f'<p class="note warning">{_e(w)}</p>' for w in s.warnings)
    rows = [
        [_e(label), *[fmt(v, 1) for v in row]]
        for label, row in zip(("0 (not relevant)", "1 (relevant)"), b.confusion, strict=True)
    ]
    figures = [
        [
            "exact agreement",
            f'<span id="binary_exact_agreement">{fmt(b.exact_agreement)}</span>',
            _ci(iv.get("exact_agreement")),
        ],
        [
            "Cohen's kappa",
            f'<span id="binary_cohen_kappa">{fmt(b.cohen_kappa)}</span>',
            _ci(iv.get("cohen_kappa")),
        ],
        [
            "relevant share, human / LLM",
            f"{fmt(b.human_relevant, 3)} / {fmt(b.llm_relevant, 3)}",
            "",
        ],
    ]
    return _joined(
        [
            "<h2>Binary comparison (the scales differ)</h2>",
            warnings,
            _table(["figure", "value", "95% CI (queries resampled)"], figures, "binary-figures"),
            _table(
                ["human \\ LLM", f"not relevant (< {t})", f"relevant (>= {t})"],
                rows,
                "binary-confusion",
                f"Binary comparison: {b.split}{cells_note(s)}",
            ),
        ]
    )


def _human_vs_human(hh: HumanVsHuman | None) -> Markup:
    if not hh:
        return Markup("")
    rows = [[_e(cell) for cell in row] for row in human_vs_human_rows(hh)]
    caption = human_vs_human_title(hh)
    return _table(["figure", "human B vs A", "LLM vs A"], rows, "human-vs-human", caption)


def _confusion(s: CalibrationSummary) -> Markup:
    rows = []
    for g, row in enumerate(s.confusion):
        recall = s.per_grade[str(g)].recall
        rows.append([str(g), *[fmt(v, 1) for v in row], fmt(recall, 3)])
    rows.append(["precision", *[fmt(s.per_grade[str(g)].precision, 3) for g in range(4)], ""])
    headers = ["human \\ LLM", "0", "1", "2", "3", "recall"]
    caption = f"Confusion: rows human grade, columns LLM grade{cells_note(s)}"
    return _table(headers, rows, "confusion", caption)


def _bias_rows(rows: list[BiasRow], with_span: bool) -> list[list[str]]:
    return [
        [
            _e(f"{r['bucket']} ({r['low']}-{r['high']})" if with_span else r["bucket"]),
            str(r["n"]),
            fmt(r["human_mean"], 3),
            fmt(r["llm_mean"], 3),
            fmt(r["mean_bias"], 3),
        ]
        for r in rows
    ]


def _systems(sy: Systems, suffix: str = "") -> Markup:
    rows = [
        [
            _e(r["run"]),
            fmt(r["human"]),
            fmt(r["llm"]),
            str(r["human_rank"]),
            str(r["llm_rank"]),
            f"{r['rank_change']:+d}",
        ]
        for r in sy.per_system
    ]
    iv = sy.intervals
    summary = (
        f'<p>Kendall tau <span id="kendall_tau{suffix}">{fmt(sy.kendall_tau)}</span> '
        f"{_ci(iv.get('kendall_tau'))}, "
        f'Spearman rho <span id="spearman_rho{suffix}">{fmt(sy.spearman_rho)}</span> '
        f"{_ci(iv.get('spearman_rho'))}, "
        f'tau_AP <span id="tau_ap{suffix}">{fmt(sy.tau_ap)}</span> {_ci(iv.get("tau_ap"))} '
        f"over {sy.n_systems} runs ({_e(sy.measure)}; pool: {_e(sy.pool)}; "
        "95% intervals resample queries).</p>"
    )
    headers = ["run", "human", "LLM", "human rank", "LLM rank", "change"]
    moves = "; ".join(
        f"{_e(r['run'])} {r['human_rank']} &rarr; {r['llm_rank']}" for r in sy.largest_swaps
    )
    swaps = f"<p>Largest rank swaps (human &rarr; LLM): {moves or 'none'}.</p>"
    return Markup(summary + _table(headers, rows, f"systems{suffix}") + swaps)


def _estimates(est: Estimates) -> Markup:
    rows = [
        [
            _e(label),
            fmt(e.llm_only),
            fmt(e.human_only),
            fmt(e.ppi),
            _ci(e.ppi_ci),
            f"{e.n_labelled} / {e.n_labelled + e.n_unlabelled}",
            _e(e.caution or ""),
        ]
        for label, e in estimate_rows(est)
    ]
    headers = ["quantity", "LLM only", "human only", "PPI++", "95% CI", "labelled / all", "note"]
    caption = f'<p class="design">{_e(estimates_caption(est))}</p>'
    return Markup(caption + _table(headers, rows, "estimates"))


def _bias(s: CalibrationSummary) -> Markup:
    """Charts and tables of bias by length and by rank (each only when computed)."""
    parts: list[str] = []
    charts = []
    if s.bias_by_length:
        charts.append(
            _figure(
                bias_svg(s.bias_by_length, "document length quintile", "Bias by length"),
                "length-chart",
                "Mean bias by document length (characters)",
            )
        )
    if s.bias_by_rank:
        charts.append(
            _figure(
                bias_svg(s.bias_by_rank, "best rank in the runs", "Bias by rank"),
                "rank-chart",
                "Mean bias by rank position",
            )
        )
    if charts:
        parts += ['<div class="charts">', *charts, "</div>"]
    headers = ["bucket", "n", "human mean", "LLM mean", "bias"]
    if s.bias_by_length:
        parts.append(
            _table(
                headers,
                _bias_rows(s.bias_by_length, True),
                "bias-length",
                "Mean bias by document length quintile (characters)",
            )
        )
    if s.bias_by_rank:
        parts.append(
            _table(
                headers,
                _bias_rows(s.bias_by_rank, False),
                "bias-rank",
                "Mean bias by best rank any run gave the pair",
            )
        )
    return _lines(parts)


def _confidence(conf: Confidence | None) -> Markup:
    if not conf or not conf.by_confidence:
        return Markup("")
    rows = [
        [str(r["bin"]), str(r["n"]), fmt(r["mean_confidence"], 3), fmt(r["exact_agreement"], 3)]
        for r in conf.by_confidence
    ]
    ece = fmt(conf.expected_calibration_error, 3)
    table = _table(
        ["quintile", "n", "mean confidence", "exact agreement"],
        rows,
        "confidence",
        f"Agreement by the judge's confidence (expected calibration error {ece})",
    )
    return _lines(["<h2>Judge confidence</h2>", table])


def _systems_sections(systems: list[Systems | None]) -> Markup:
    """A "System ranking (MEASURE)" section per measure. The first keeps the plain ids
    (`systems`, `systems-chart`, `kendall_tau`, ...); each further one adds `-MEASURE` to them
    (`systems-P-rel-2-10`), so every id on the page is unique."""
    parts: list[str] = []
    used: set[str] = set()
    for i, sy in enumerate(systems):
        if not sy:
            continue
        suffix = "" if i == 0 else "-" + (re.sub(r"[^A-Za-z0-9]+", "-", sy.measure).strip("-"))
        while suffix in used:
            suffix += f"-{i}"
        used.add(suffix)
        heading = f"<h2>System ranking ({_e(sy.measure)})</h2>"
        if sy.left_out:
            parts += [heading, f'<p id="systems-left-out{suffix}">{_e(sy.left_out)}</p>']
            continue
        svg = systems_svg(sy.per_system, sy.measure)
        chart = _figure(svg, f"systems-chart{suffix}", f"Systems: {sy.measure}")
        parts += [heading, chart, _systems(sy, suffix)]
    return _lines(parts)


def _per_query(s: CalibrationSummary) -> Markup:
    rows = [
        [
            _e(q["query_id"]),
            str(q["n"]),
            fmt(q["exact_agreement"], 3),
            fmt(q["cohen_kappa"], 3),
            fmt(q["weighted_kappa_quadratic"], 3),
            fmt(q["mean_bias"], 3),
        ]
        for q in s.per_query
    ]
    headers = ["query", "n", "exact", "kappa", "quadratic kappa", "bias"]
    return _table(headers, rows, "per-query")


def _joined(parts: list[str]) -> Markup:
    """Parts of one section, one per line."""
    return Markup("\n".join(parts))


def _lines(parts: list[str]) -> Markup:
    """Optional page sections: each line after a newline, so an absent one leaves no gap."""
    return Markup("".join("\n" + p for p in parts))


def render_report(s: CalibrationSummary, title: str = "relgrade calibration") -> str:
    """The whole report as an HTML string."""
    c = s.counts
    weighted = " Every figure is weighted by the sample manifest (1/pi)." if s.weighted else ""
    if s.design_sample is not None and s.design_sample.outside:
        weighted = " " + design_sample_sentence(s.design_sample)
    data = html.escape(json.dumps(s.to_json(), allow_nan=False), quote=False)
    estimates = s.estimates
    return fill(
        template("calibration.html"),
        title=title,
        css=Markup(CSS),
        n=s.n,
        queries=c.queries,
        llm_only=c.llm_only,
        human_only=c.human_only,
        weighted=weighted,
        verdict=s.verdict.text,
        binary_scale=_binary_scale(s),
        confusion_chart=_figure(
            confusion_svg(s.confusion), "confusion-chart", f"Confusion matrix{cells_note(s)}"
        ),
        distribution_chart=_figure(
            distributions_svg(s.distributions), "distribution-chart", "Grade shares"
        ),
        agreement=_agreement(s),
        confusion=_confusion(s),
        human_vs_human=_human_vs_human(s.human_vs_human),
        bias=_bias(s),
        confidence=_confidence(s.confidence),
        systems=_systems_sections(list((s.systems_by_measure or {}).values()) or [s.systems]),
        estimates=_lines(["<h2>Estimates (PPI++)</h2>", _estimates(estimates)])
        if estimates
        else Markup(""),
        per_query=_per_query(s),
        notes=_lines([f'<p class="note">{_e(n)}</p>' for n in s.notes]),
        data=Markup(data),
    )


def write_report(path: str | Path, summary: CalibrationSummary) -> None:
    """Write the report atomically."""
    with atomic_write(path) as fh:
        fh.write(render_report(summary))
