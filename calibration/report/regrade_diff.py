"""`regrade --report diff.html`: the diff between versions as one self-contained HTML file, in
the calibration report's look (its stylesheet; no script or outside resource).

The page skeleton is `templates/regrade_diff.html`; every dynamic text is escaped. Stable ids
(`n`, `changed`, `kappa_between_versions`, `failed`, `cost`, `cost_without_batch`, `transition`,
`changed-pairs`, `metric-deltas`) let tests and scripts read the figures. It lives here, beside
the calibration report it shares its look with, because the `grader` library never imports
`calibration`: the CLI ties the two together.
"""

from __future__ import annotations

from pathlib import Path

from calibration.report.page import Markup, escape, fill, stylesheet, template
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
    body = "".join(
        f"<tr><td>{escape(d['run'])}</td><td>{escape(d['measure'])}</td><td>{d['old']:.4f}</td>"
        f"<td>{d['new']:.4f}</td><td>{d['delta']:+.4f}</td></tr>"
        for d in diff.metric_deltas
    )
    return Markup(
        "\n<h2>Metric deltas</h2>\n"
        '<table id="metric-deltas"><thead><tr><th>run</th><th>measure</th><th>old</th>'
        f"<th>new</th><th>delta</th></tr></thead><tbody>{body}</tbody></table>\n"
        '<p class="note">Both versions scored on the pairs graded ok in both.</p>'
    )


def _changed_pairs(diff: RegradeDiff) -> Markup:
    """The table of changed pairs, or a sentence saying none changed (never an empty table)."""
    if not diff.changed_pairs:
        compared = f"of the {diff.compared} graded ok in both versions " if diff.compared else ""
        return Markup(
            f'<p id="changed-pairs" class="note">No pair {compared}changed its grade.</p>'
        )
    body = "".join(
        f"<tr><td>{escape(c.query_id)}</td><td>{escape(c.doc_id)}</td><td>{c.old_grade}</td>"
        f"<td>{c.new_grade}</td><td>{escape(c.old_reason or '')}</td>"
        f"<td>{escape(c.new_reason or '')}</td></tr>"
        for c in diff.changed_pairs
    )
    return Markup(
        '<table id="changed-pairs"><thead><tr><th>query</th><th>doc</th><th>old</th><th>new</th>'
        f"<th>old reason</th><th>new reason</th></tr></thead><tbody>{body}</tbody></table>"
    )


def _failed_pairs(diff: RegradeDiff) -> Markup:
    if not diff.failed_pairs:
        return Markup("")
    body = "".join(
        f"<tr><td>{escape(f['query_id'])}</td><td>{escape(f['doc_id'])}</td>"
        f"<td>{escape(f['error'])}</td></tr>"
        for f in diff.failed_pairs
    )
    return Markup(
        "\n<h2>Failed (rerun to retry)</h2>\n"
        '<table id="failed-pairs"><thead><tr><th>query</th><th>doc</th><th>error</th></tr>'
        f"</thead><tbody>{body}</tbody></table>"
    )


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
        css=Markup(stylesheet()),
        old_label=old_label,
        new_label=new_label,
        n=diff.n,
        compared=diff.compared,
        changed=diff.changed,
        failed=diff.failed,
        pending=diff.pending,
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
