"""The calibration report: one self-contained HTML file (no script, stylesheet or image from
elsewhere), pictures as inline SVG. Pages fill `string.Template` files in `templates/`, escaping
every value but `Markup`; key figures carry stable ids (e.g. `id="cohen_kappa"`) for tests."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from functools import cache
from importlib.resources import files
from pathlib import Path
from string import Template

from calibration.report import cells
from calibration.report.cells import ci, fmt
from calibration.report.plots import bias_svg, confusion_svg, distributions_svg, systems_svg
from calibration.summary_model import CalibrationSummary, Confidence, Estimates, Systems
from grader.io.files import atomic_write


class Markup(str):
    """HTML built by the report code from escaped parts: goes into a template as is."""

    __slots__ = ()


def escape(value: object) -> Markup:
    """`value` as HTML text (quotes escaped too)."""
    return Markup(html.escape(str(value)))


@cache
def _text(name: str) -> str:
    return (files("calibration.report") / "templates" / name).read_text(encoding="utf-8")


def template(name: str) -> Template:
    """The page skeleton `templates/<name>` (its final newline dropped: pages end at the tag)."""
    return Template(_text(name).removesuffix("\n"))


def fill(page: Template, **values: object) -> str:
    """`page` with every slot filled: `Markup` as is, anything else HTML-escaped. A missing or
    unknown slot is an error, never a silently empty spot."""
    names = set(page.get_identifiers())
    if names != set(values):
        missing, unknown = sorted(names - set(values)), sorted(set(values) - names)
        raise KeyError(f"template slots: missing {missing}, unknown {unknown}")
    safe = {k: v if isinstance(v, Markup) else escape(v) for k, v in values.items()}
    return page.substitute(safe)


def table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], table_id: str, caption: str = ""
) -> Markup:
    """A table; `rows` hold cells that are HTML already (numbers, or escaped text)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    cap = f"<caption>{escape(caption)}</caption>" if caption else ""
    return Markup(
        f'<table id="{table_id}">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    )


CSS = Markup(_text("report.css"))
"""The reports' shared stylesheet (templates/report.css)."""


def _escaped(rows: list[list[str]]) -> list[list[str]]:
    return [[escape(c) for c in row] for row in rows]


def _figure(svg: str, figure_id: str, caption: str) -> Markup:
    cap = escape(caption)
    return Markup(f'<figure id="{figure_id}">{svg}<figcaption>{cap}</figcaption></figure>')


def _agreement(s: CalibrationSummary) -> Markup:
    rows = [
        [escape(label), f'<span id="{key}">{fmt(value)}</span>', interval]
        for key, label, value, interval in cells.agreement_rows(s)
    ]
    return table(["figure", "value", cells.CI_HEADER], rows, "agreement")


def _binary_scale(s: CalibrationSummary) -> Markup:
    """People graded 0/1, the LLM 0..3: the warning and the comparison at the matching split."""
    b = s.binary_scale
    if not b:
        return Markup("")
    iv = b.intervals
    t = b.threshold
    warnings = "".join(f'<p class="note warning">{escape(w)}</p>' for w in s.warnings)
    rows = _escaped(cells.binary_rows(s))
    figures = [
        [label, f'<span id="binary_{key}">{fmt(b[key])}</span>', ci(iv.get(key))]
        for key, label in (("exact_agreement", "exact agreement"), ("cohen_kappa", "Cohen's kappa"))
    ]
    shares = f"{fmt(b.human_relevant, 3)} / {fmt(b.llm_relevant, 3)}"
    figures.append(["relevant share, human / LLM", shares, ""])
    confusion = table(
        ["human \\ LLM", f"not relevant (< {t})", f"relevant (>= {t})"],
        rows,
        "binary-confusion",
        f"Binary comparison: {b.split}{cells.cells_note(s)}",
    )
    figures_table = table(["figure", "value", cells.CI_HEADER], figures, "binary-figures")
    heading = "<h2>Binary comparison (the scales differ)</h2>"
    return Markup("\n".join([heading, warnings, figures_table, confusion]))


def _human_vs_human(s: CalibrationSummary) -> Markup:
    if not (hh := s.human_vs_human):
        return Markup("")
    rows = _escaped(cells.human_vs_human_rows(hh))
    caption = cells.human_vs_human_title(hh)
    return table(["figure", "human B vs A", "LLM vs A"], rows, "human-vs-human", caption)


def _confusion(s: CalibrationSummary) -> Markup:
    headers = ["human \\ LLM", "0", "1", "2", "3", "recall"]
    caption = f"Confusion: rows human grade, columns LLM grade{cells.cells_note(s)}"
    return table(headers, cells.confusion_rows(s), "confusion", caption)


def _systems(sy: Systems, suffix: str = "") -> Markup:
    iv = sy.intervals
    summary = (
        f'<p>Kendall tau <span id="kendall_tau{suffix}">{fmt(sy.kendall_tau)}</span> '
        f"{ci(iv.get('kendall_tau'))}, "
        f'Spearman rho <span id="spearman_rho{suffix}">{fmt(sy.spearman_rho)}</span> '
        f"{ci(iv.get('spearman_rho'))}, "
        f'tau_AP <span id="tau_ap{suffix}">{fmt(sy.tau_ap)}</span> {ci(iv.get("tau_ap"))} '
        f"over {sy.n_systems} runs ({escape(sy.measure)}; pool: {escape(sy.pool)}; "
        "95% intervals resample queries).</p>"
    )
    moves = "; ".join(
        f"{escape(r['run'])} {r['human_rank']} &rarr; {r['llm_rank']}" for r in sy.largest_swaps
    )
    swaps = f"<p>Largest rank swaps (human &rarr; LLM): {moves or 'none'}.</p>"
    rows = _escaped(cells.system_rows(sy))
    return Markup(summary + table(cells.SYSTEM_HEADERS, rows, f"systems{suffix}") + swaps)


def _estimates(est: Estimates) -> Markup:
    rows = [
        [*cells.estimate_cells(label, e), e.caution or ""] for label, e in cells.estimate_rows(est)
    ]
    headers = [*cells.ESTIMATE_HEADERS[:-1], "labelled / all", "note"]
    caption = f'<p class="design">{escape(cells.estimates_caption(est))}</p>'
    return Markup(caption + table(headers, _escaped(rows), "estimates"))


BIAS_PARTS = (  # (attribute, id, chart's axis and title, chart's caption, table's caption)
    (
        "bias_by_length",
        "length",
        "document length quintile",
        "Bias by length",
        "Mean bias by document length (characters)",
        "Mean bias by document length quintile (characters)",
    ),
    (
        "bias_by_rank",
        "rank",
        "best rank in the runs",
        "Bias by rank",
        "Mean bias by rank position",
        "Mean bias by best rank any run gave the pair",
    ),
)


def _bias(s: CalibrationSummary) -> Markup:
    """Charts and tables of bias by length and by rank (each only when computed)."""
    charts, tables = [], []
    headers = ["bucket", "n", "human mean", "LLM mean", "bias"]
    for key, name, axis, title, chart_caption, table_caption in BIAS_PARTS:
        rows = getattr(s, key)
        if rows:
            charts.append(_figure(bias_svg(rows, axis, title), f"{name}-chart", chart_caption))
            shown = _escaped(cells.bias_rows(rows, name == "length"))
            tables.append(table(headers, shown, f"bias-{name}", table_caption))
    return _lines(['<div class="charts">', *charts, "</div>", *tables] if charts else [])


def _confidence(conf: Confidence | None) -> Markup:
    if not conf or not conf.by_confidence:
        return Markup("")
    ece = fmt(conf.expected_calibration_error, 3)
    caption = f"Agreement by the judge's confidence (expected calibration error {ece})"
    rows = cells.confidence_rows(conf)
    return _lines(
        ["<h2>Judge confidence</h2>", table(cells.CONFIDENCE_HEADERS, rows, "confidence", caption)]
    )


def _systems_sections(systems: list[Systems | None]) -> Markup:
    """A "System ranking (MEASURE)" section per measure: the first with the plain ids (`systems`,
    `kendall_tau`, ...), each further one adding `-MEASURE` (`systems-P-rel-2-10`) to them."""
    parts: list[str] = []
    used: set[str] = set()
    for i, sy in enumerate(systems):
        if not sy:
            continue
        suffix = "" if i == 0 else "-" + (re.sub(r"[^A-Za-z0-9]+", "-", sy.measure).strip("-"))
        while suffix in used:
            suffix += f"-{i}"
        used.add(suffix)
        heading = f"<h2>System ranking ({escape(sy.measure)})</h2>"
        if sy.left_out:
            parts += [heading, f'<p id="systems-left-out{suffix}">{escape(sy.left_out)}</p>']
            continue
        svg = systems_svg(sy.per_system, sy.measure)
        chart = _figure(svg, f"systems-chart{suffix}", f"Systems: {sy.measure}")
        parts += [heading, chart, _systems(sy, suffix)]
    return _lines(parts)


def _lines(parts: list[str]) -> Markup:
    """Optional page sections: each line after a newline, so an absent one leaves no gap."""
    return Markup("".join("\n" + p for p in parts))


def render_report(s: CalibrationSummary, title: str = "relgrade calibration") -> str:
    """The whole report as an HTML string."""
    weighted = " Every figure is weighted by the sample manifest (1/pi)." if s.weighted else ""
    if s.design_sample is not None and s.design_sample.outside:
        weighted = " " + cells.design_sample_sentence(s.design_sample)
    data = html.escape(json.dumps(s.to_json(), allow_nan=False), quote=False)
    estimates = s.estimates
    return fill(
        template("calibration.html"),
        title=title,
        css=CSS,
        n=s.n,
        **s.counts.model_dump(include={"queries", "llm_only", "human_only"}),
        weighted=weighted,
        verdict=s.verdict.text,
        binary_scale=_binary_scale(s),
        confusion_chart=_figure(
            confusion_svg(s.confusion), "confusion-chart", f"Confusion matrix{cells.cells_note(s)}"
        ),
        distribution_chart=_figure(
            distributions_svg(s.distributions), "distribution-chart", "Grade shares"
        ),
        agreement=_agreement(s),
        confusion=_confusion(s),
        human_vs_human=_human_vs_human(s),
        bias=_bias(s),
        confidence=_confidence(s.confidence),
        systems=_systems_sections(list((s.systems_by_measure or {}).values()) or [s.systems]),
        estimates=_lines(["<h2>Estimates (PPI++)</h2>", _estimates(estimates)])
        if estimates
        else Markup(""),
        per_query=table(cells.QUERY_HEADERS, _escaped(cells.query_rows(s.per_query)), "per-query"),
        notes=_lines([f'<p class="note">{escape(n)}</p>' for n in s.notes]),
        data=Markup(data),
    )


def write_report(path: str | Path, summary: CalibrationSummary) -> None:
    """Write the report atomically."""
    with atomic_write(path) as fh:
        fh.write(render_report(summary))
