"""`regrade --report diff.html`: the diff between versions as one self-contained HTML file with
stable ids for tests; here, beside the calibration report whose look it shares, because the
`grader` library never imports `calibration`."""

from __future__ import annotations

from pathlib import Path

from calibration.report.html import CSS, Markup, escape, fill, table, template
from grader.cost import usd_or_unknown
from grader.io.files import atomic_write
from grader.models import GRADES
from grader.regrade.diff import RegradeDiff


def _heat(count: int, row_total: int) -> str:
    share = count / row_total if row_total else 0.0
    blue = int(255 - 150 * share)
    colour = "white" if share > 0.6 else "black"
    style = f"background: rgb({blue}, {blue + (255 - blue) // 3}, 255); color: {colour}"
    return f'<td class="heat" style="{style}">{count}</td>'


def _metric_deltas(diff: RegradeDiff) -> Markup:
    if not diff.metric_deltas:
        return Markup("")
    rows = [
        [
            escape(d["run"]),
            escape(d["measure"]),
            f"{d['old']:.4f}",
            f"{d['new']:.4f}",
            f"{d['delta']:+.4f}",
        ]
        for d in diff.metric_deltas
    ]
    headers = ["run", "measure", "old", "new", "delta"]
    return Markup(
        f"\n<h2>Metric deltas</h2>\n{table(headers, rows, 'metric-deltas')}\n"
        '<p class="note">Both versions scored on the pairs graded ok in both.</p>'
    )


def _changed_pairs(diff: RegradeDiff) -> Markup:
    """The table of changed pairs, or a sentence saying none changed (never an empty table)."""
    if not diff.changed_pairs:
        compared = f"of the {diff.compared} graded ok in both versions " if diff.compared else ""
        return Markup(
            f'<p id="changed-pairs" class="note">No pair {compared}changed its grade.</p>'
        )
    rows = [
        [escape(v) for v in (c.query_id, c.doc_id, c.old_grade, c.new_grade)]
        + [escape(c.old_reason or ""), escape(c.new_reason or "")]
        for c in diff.changed_pairs
    ]
    headers = ["query", "doc", "old", "new", "old reason", "new reason"]
    return table(headers, rows, "changed-pairs")


def _failed_pairs(diff: RegradeDiff) -> Markup:
    if not diff.failed_pairs:
        return Markup("")
    rows = [[escape(f[k]) for k in ("query_id", "doc_id", "error")] for f in diff.failed_pairs]
    failed = table(["query", "doc", "error"], rows, "failed-pairs")
    return Markup(f"\n<h2>Failed (rerun to retry)</h2>\n{failed}")


def render_diff_html(diff: RegradeDiff, *, title: str, old_label: str, new_label: str) -> str:
    """The report as an HTML string."""
    kappa = diff.kappa_between_versions
    rows = "".join(
        f"<tr><th>old {g}</th>" + "".join(_heat(c, sum(row)) for c in row) + "</tr>"
        for g, row in enumerate(diff.transition)
    )
    return fill(
        template("regrade_diff.html"),
        title=title,
        css=CSS,
        old_label=old_label,
        new_label=new_label,
        **{k: getattr(diff, k) for k in ("n", "compared", "changed", "failed", "pending")},
        kappa="n/a" if kappa is None else f"{kappa:.3f}",
        cost=usd_or_unknown(diff.cost),
        cost_without_batch=usd_or_unknown(diff.cost_without_batch),
        batch_graded=diff.batch_graded,
        transition_head=Markup("".join(f"<th>new {g}</th>" for g in GRADES)),
        transition_rows=Markup(rows),
        metric_deltas=_metric_deltas(diff),
        changed_pairs=_changed_pairs(diff),
        failed_pairs=_failed_pairs(diff),
    )


def write_diff_html(
    path: str | Path, diff: RegradeDiff, *, title: str, old_label: str, new_label: str
) -> None:
    """Write the report atomically."""
    text = render_diff_html(diff, title=title, old_label=old_label, new_label=new_label)
    with atomic_write(path) as fh:
        fh.write(text)
