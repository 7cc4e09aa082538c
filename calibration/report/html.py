"""The calibration report: one self-contained HTML file with pictures and the numbers in tables.

Pictures are inline SVG (see `calibration.report.plots`); there is no script, stylesheet, font or
image from elsewhere, so the file opens offline, can be mailed, and shows the same in every browser.
Key figures carry stable ids (e.g. `id="cohen_kappa"`) so tests and scripts can read them.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from calibration.report.plots import bias_svg, confusion_svg, distributions_svg, systems_svg
from calibration.report.tables import (
    AGREEMENT_ROWS,
    estimate_rows,
    estimates_caption,
    fmt,
    human_vs_human_rows,
    human_vs_human_title,
)
from grader.io.files import atomic_write

CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.charts { display: flex; flex-wrap: wrap; gap: 1.5em; }
figure { margin: 0; } figure svg { max-width: 100%; height: auto; }
.verdict { font-size: 1.1em; padding: 0.6em; background: #f4f4f4; border-left: 4px solid #888; }
.note { color: #666; }
caption { text-align: left; font-weight: bold; padding: 0.3em 0; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value))


def _ci(ci: list[float | None] | None) -> str:
    if not ci or ci[0] is None or ci[1] is None:
        return ""
    return f"[{ci[0]:.4f}, {ci[1]:.4f}]"


def _table(headers: list[str], rows: list[list[str]], table_id: str, caption: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    cap = f"<caption>{_e(caption)}</caption>" if caption else ""
    return (
        f'<table id="{table_id}">{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'
    )


def _figure(svg: str, figure_id: str, caption: str) -> str:
    return f'<figure id="{figure_id}">{svg}<figcaption>{_e(caption)}</figcaption></figure>'


def _agreement(s: dict[str, Any]) -> str:
    intervals = s.get("intervals", {})
    rows = [
        [_e(label), f'<span id="{key}">{fmt(s.get(key))}</span>', _ci(intervals.get(key))]
        for key, label in AGREEMENT_ROWS
    ]
    for t, value in s["binary_kappa"].items():
        split = "0123"[: int(t)] + "|" + "0123"[int(t) :]
        rows.append(
            [
                f"binary kappa {split}",
                f'<span id="binary_kappa_{t}">{fmt(value)}</span>',
                _ci(intervals.get(f"binary_kappa_{t}")),
            ]
        )
    return _table(["figure", "value", "95% CI (queries resampled)"], rows, "agreement")


def _binary_scale(s: dict[str, Any]) -> str:
    """People graded 0/1, the LLM 0..3: the warning and the comparison at the matching split."""
    b = s.get("binary_scale")
    if not b:
        return ""
    iv = b.get("intervals", {})
    t = b["threshold"]
    warnings = "".join(f'<p class="note warning">{_e(w)}</p>' for w in s.get("warnings", []))
    rows = [
        [_e(label), *[fmt(v, 1) for v in row]]
        for label, row in zip(("0 (not relevant)", "1 (relevant)"), b["confusion"], strict=True)
    ]
    figures = [
        [
            "exact agreement",
            f'<span id="binary_exact_agreement">{fmt(b["exact_agreement"])}</span>',
            _ci(iv.get("exact_agreement")),
        ],
        [
            "Cohen's kappa",
            f'<span id="binary_cohen_kappa">{fmt(b["cohen_kappa"])}</span>',
            _ci(iv.get("cohen_kappa")),
        ],
        [
            "relevant share, human / LLM",
            f"{fmt(b['human_relevant'], 3)} / {fmt(b['llm_relevant'], 3)}",
            "",
        ],
    ]
    return "\n".join(
        [
            "<h2>Binary comparison (the scales differ)</h2>",
            warnings,
            _table(["figure", "value", "95% CI (queries resampled)"], figures, "binary-figures"),
            _table(
                ["human \\ LLM", f"not relevant (< {t})", f"relevant (>= {t})"],
                rows,
                "binary-confusion",
                f"Binary comparison: {b['split']}",
            ),
        ]
    )


def _human_vs_human(hh: dict[str, Any] | None) -> str:
    if not hh:
        return ""
    rows = [[_e(cell) for cell in row] for row in human_vs_human_rows(hh)]
    caption = human_vs_human_title(hh)
    return _table(["figure", "human B vs A", "LLM vs A"], rows, "human-vs-human", caption)


def _confusion(s: dict[str, Any]) -> str:
    rows = []
    for g, row in enumerate(s["confusion"]):
        recall = s["per_grade"][str(g)]["recall"]
        rows.append([str(g), *[fmt(v, 1) for v in row], fmt(recall, 3)])
    rows.append(["precision", *[fmt(s["per_grade"][str(g)]["precision"], 3) for g in range(4)], ""])
    headers = ["human \\ LLM", "0", "1", "2", "3", "recall"]
    return _table(headers, rows, "confusion", "Confusion: rows human grade, columns LLM grade")


def _bias_rows(rows: list[dict[str, Any]], with_span: bool) -> list[list[str]]:
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


def _systems(sy: dict[str, Any]) -> str:
    rows = [
        [
            _e(r["run"]),
            fmt(r["human"]),
            fmt(r["llm"]),
            str(r["human_rank"]),
            str(r["llm_rank"]),
            f"{r['rank_change']:+d}",
        ]
        for r in sy["per_system"]
    ]
    iv = sy.get("intervals", {})
    summary = (
        f'<p>Kendall tau <span id="kendall_tau">{fmt(sy["kendall_tau"])}</span> '
        f"{_ci(iv.get('kendall_tau'))}, "
        f'Spearman rho <span id="spearman_rho">{fmt(sy["spearman_rho"])}</span> '
        f"{_ci(iv.get('spearman_rho'))}, "
        f'tau_AP <span id="tau_ap">{fmt(sy["tau_ap"])}</span> {_ci(iv.get("tau_ap"))} '
        f"over {sy['n_systems']} runs ({_e(sy['measure'])}; pool: {_e(sy['pool'])}; "
        "95% intervals resample queries).</p>"
    )
    headers = ["run", "human", "LLM", "human rank", "LLM rank", "change"]
    moves = "; ".join(
        f"{_e(r['run'])} {r['human_rank']} &rarr; {r['llm_rank']}" for r in sy["largest_swaps"]
    )
    swaps = f"<p>Largest rank swaps (human &rarr; LLM): {moves or 'none'}.</p>"
    return summary + _table(headers, rows, "systems") + swaps


def _estimates(est: dict[str, Any]) -> str:
    rows = [
        [
            _e(label),
            fmt(e["llm_only"]),
            fmt(e["human_only"]),
            fmt(e["ppi"]),
            _ci(e["ppi_ci"]),
            f"{e['n_labelled']} / {e['n_labelled'] + e['n_unlabelled']}",
            _e(e.get("caution") or ""),
        ]
        for label, e in estimate_rows(est)
    ]
    headers = ["quantity", "LLM only", "human only", "PPI++", "95% CI", "labelled / all", "note"]
    caption = f'<p class="design">{_e(estimates_caption(est))}</p>'
    return caption + _table(headers, rows, "estimates")


def render_report(s: dict[str, Any], title: str = "relgrade calibration") -> str:
    """The whole report as an HTML string."""
    c = s["counts"]
    weighted = (
        " Every figure is weighted by the sample manifest (1/pi)." if s.get("weighted") else ""
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f'<p><span id="n">{s["n"]}</span> pairs graded by both over {c["queries"]} queries; '
        f"{c['llm_only']} pairs graded by the LLM only, {c['human_only']} by people only."
        f"{weighted}</p>",
        f'<p class="verdict" id="verdict">{_e(s["verdict"]["text"])}</p>',
        _binary_scale(s),
        "<h2>Agreement</h2>",
        '<div class="charts">',
        _figure(confusion_svg(s["confusion"]), "confusion-chart", "Confusion matrix"),
        _figure(distributions_svg(s["distributions"]), "distribution-chart", "Grade shares"),
        "</div>",
        _agreement(s),
        _confusion(s),
        _human_vs_human(s.get("human_vs_human")),
        "<h2>Bias</h2>",
    ]
    charts = []
    if s.get("bias_by_length"):
        charts.append(
            _figure(
                bias_svg(s["bias_by_length"], "document length quintile", "Bias by length"),
                "length-chart",
                "Mean bias by document length (characters)",
            )
        )
    if s.get("bias_by_rank"):
        charts.append(
            _figure(
                bias_svg(s["bias_by_rank"], "best rank in the runs", "Bias by rank"),
                "rank-chart",
                "Mean bias by rank position",
            )
        )
    if charts:
        parts += ['<div class="charts">', *charts, "</div>"]
    headers = ["bucket", "n", "human mean", "LLM mean", "bias"]
    if s.get("bias_by_length"):
        parts.append(
            _table(
                headers,
                _bias_rows(s["bias_by_length"], True),
                "bias-length",
                "Mean bias by document length quintile (characters)",
            )
        )
    if s.get("bias_by_rank"):
        parts.append(
            _table(
                headers,
                _bias_rows(s["bias_by_rank"], False),
                "bias-rank",
                "Mean bias by best rank any run gave the pair",
            )
        )
    conf = s.get("confidence") or {}
    if conf.get("by_confidence"):
        rows = [
            [str(r["bin"]), str(r["n"]), fmt(r["mean_confidence"], 3), fmt(r["exact_agreement"], 3)]
            for r in conf["by_confidence"]
        ]
        ece = fmt(conf.get("expected_calibration_error"), 3)
        parts += [
            "<h2>Judge confidence</h2>",
            _table(
                ["quintile", "n", "mean confidence", "exact agreement"],
                rows,
                "confidence",
                f"Agreement by the judge's confidence (expected calibration error {ece})",
            ),
        ]
    if s.get("systems"):
        sy = s["systems"]
        parts += [
            "<h2>System ranking</h2>",
            _figure(systems_svg(sy["per_system"], sy["measure"]), "systems-chart", "Systems"),
            _systems(sy),
        ]
    if s.get("estimates"):
        parts += ["<h2>Estimates (PPI++)</h2>", _estimates(s["estimates"])]
    per_query = [
        [
            _e(q["query_id"]),
            str(q["n"]),
            fmt(q["exact_agreement"], 3),
            fmt(q["cohen_kappa"], 3),
            fmt(q["weighted_kappa_quadratic"], 3),
            fmt(q["mean_bias"], 3),
        ]
        for q in s.get("per_query", [])
    ]
    parts += [
        "<h2>Per query</h2>",
        _table(["query", "n", "exact", "kappa", "quadratic kappa", "bias"], per_query, "per-query"),
    ]
    parts += [f'<p class="note">{_e(n)}</p>' for n in s.get("notes", [])]
    data = html.escape(json.dumps(s, allow_nan=False), quote=False)
    parts += [f'<script type="application/json" id="data">{data}</script>', "</body></html>"]
    return "\n".join(parts)


def write_report(path: str | Path, summary: dict[str, Any]) -> None:
    """Write the report atomically."""
    with atomic_write(path) as fh:
        fh.write(render_report(summary))
