"""`regrade --report diff.html`: the diff between versions as one self-contained HTML file, in
the calibration report's look (its stylesheet; no script or outside resource).

Stable ids (`n`, `changed`, `kappa_between_versions`, `failed`, `cost`, `cost_without_batch`,
`transition`, `changed-pairs`, `metric-deltas`) let tests and scripts read the figures.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from calibration.report.html import CSS
from grader.cost import usd_or_unknown
from grader.io.files import atomic_write
from grader.models import GRADES
from grader.regrade.diff import RegradeDiff

_EXTRA_CSS = "td.heat { text-align: center; min-width: 3em; }"


def _e(value: Any) -> str:
    return html.escape(str(value))


def _heat(count: int, row_total: int) -> str:
    share = count / row_total if row_total else 0.0
    blue = int(255 - 150 * share)
    colour = "white" if share > 0.6 else "black"
    style = f"background: rgb({blue}, {blue + (255 - blue) // 3}, 255); color: {colour}"
    return f'<td class="heat" style="{style}">{count}</td>'


def render_diff_html(diff: RegradeDiff, *, title: str, old_label: str, new_label: str) -> str:
    """The report as an HTML string."""
    kappa = diff.kappa_between_versions
    head = "".join(f"<th>new {g}</th>" for g in GRADES)
    rows = "".join(
        f"<tr><th>old {g}</th>" + "".join(_heat(c, sum(row)) for c in row) + "</tr>"
        for g, row in enumerate(diff.transition)
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title><style>{CSS}{_EXTRA_CSS}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f"<p>{_e(old_label)} &rarr; {_e(new_label)}: "
        f'<span id="n">{diff.n}</span> pairs, {diff.compared} graded ok in both, '
        f'<span id="changed">{diff.changed}</span> changed, '
        f'<span id="failed">{diff.failed}</span> failed, {diff.pending} pending.</p>',
        '<p class="verdict">Cohen\'s kappa between versions: <span id="kappa_between_versions">'
        f"{'n/a' if kappa is None else f'{kappa:.3f}'}</span></p>",
        f'<p>Cost <span id="cost">{usd_or_unknown(diff.cost)}</span> (without the batch discount '
        f'<span id="cost_without_batch">{usd_or_unknown(diff.cost_without_batch)}</span>; '
        f"{diff.batch_graded} graded by batch).</p>",
        "<h2>Transition</h2>",
        '<table id="transition"><caption>Rows: old grade; columns: new grade (colour: share of '
        f"the old row)</caption><thead><tr><th></th>{head}</tr></thead><tbody>{rows}</tbody>"
        "</table>",
    ]
    if diff.metric_deltas:
        body = "".join(
            f"<tr><td>{_e(d['run'])}</td><td>{_e(d['measure'])}</td><td>{d['old']:.4f}</td>"
            f"<td>{d['new']:.4f}</td><td>{d['delta']:+.4f}</td></tr>"
            for d in diff.metric_deltas
        )
        parts += [
            "<h2>Metric deltas</h2>",
            '<table id="metric-deltas"><thead><tr><th>run</th><th>measure</th><th>old</th>'
            f"<th>new</th><th>delta</th></tr></thead><tbody>{body}</tbody></table>",
            '<p class="note">Both versions scored on the pairs graded ok in both.</p>',
        ]
    body = "".join(
        f"<tr><td>{_e(c.query_id)}</td><td>{_e(c.doc_id)}</td><td>{c.old_grade}</td>"
        f"<td>{c.new_grade}</td><td>{_e(c.old_reason or '')}</td>"
        f"<td>{_e(c.new_reason or '')}</td></tr>"
        for c in diff.changed_pairs
    )
    parts += [
        "<h2>Changed pairs</h2>",
        '<table id="changed-pairs"><thead><tr><th>query</th><th>doc</th><th>old</th><th>new</th>'
        f"<th>old reason</th><th>new reason</th></tr></thead><tbody>{body}</tbody></table>",
    ]
    if diff.failed_pairs:
        body = "".join(
            f"<tr><td>{_e(f['query_id'])}</td><td>{_e(f['doc_id'])}</td>"
            f"<td>{_e(f['error'])}</td></tr>"
            for f in diff.failed_pairs
        )
        parts += [
            "<h2>Failed (rerun to retry)</h2>",
            '<table id="failed-pairs"><thead><tr><th>query</th><th>doc</th><th>error</th></tr>'
            f"</thead><tbody>{body}</tbody></table>",
        ]
    parts.append("</body></html>")
    return "\n".join(parts)


def write_diff_html(path: str | Path, diff: RegradeDiff, **labels: str) -> None:
    # labels: title, old_label, new_label
    """Write the report atomically."""
    text = render_diff_html(
        diff, title=labels["title"], old_label=labels["old_label"], new_label=labels["new_label"]
    )
    with atomic_write(path) as fh:
        fh.write(text)
