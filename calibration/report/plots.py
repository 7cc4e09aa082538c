"""The report's pictures as inline SVG (matplotlib's Figure API, no pyplot state): confusion
heatmap, grade distributions, bias by length, systems' scores. Text stays text
(`svg.fonttype = none`), so a browser test can read the numbers."""

from __future__ import annotations

import io
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from grader.models import GRADES

STYLE: dict[Any, Any] = {"svg.fonttype": "none", "svg.hashsalt": "relgrade", "font.size": 10}
HUMAN_COLOUR = "#4C72B0"
LLM_COLOUR = "#DD8452"


@contextmanager
def _axes(width: float, height: float) -> Iterator[tuple[Any, Any]]:
    """A figure in the report's style and its axes (matplotlib loads when a picture is drawn)."""
    from matplotlib import rc_context
    from matplotlib.figure import Figure

    with rc_context(STYLE):
        fig = Figure(figsize=(width, height), layout="constrained")
        yield fig, fig.subplots()


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    # matplotlib's RDF metadata names web vocabularies; the picture needs none of it
    return re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.DOTALL)


def confusion_svg(confusion: Sequence[Sequence[float]]) -> str:
    """Heatmap of the confusion matrix: rows human grade, columns LLM grade, counts written in."""
    c = np.asarray(confusion, dtype=np.float64)
    share = c / c.sum(axis=1, keepdims=True).clip(min=1e-12)
    with _axes(4.2, 3.6) as (fig, ax):
        im = ax.imshow(share, cmap="Blues", vmin=0, vmax=1)
        for h in range(c.shape[0]):
            for m in range(c.shape[1]):
                colour = "white" if share[h, m] > 0.6 else "black"
                label = f"{c[h, m]:.0f}" if float(c[h, m]).is_integer() else f"{c[h, m]:.1f}"
                ax.text(m, h, label, ha="center", va="center", color=colour)
        ax.set_xticks(GRADES, [str(g) for g in GRADES])
        ax.set_yticks(GRADES, [str(g) for g in GRADES])
        ax.set(xlabel="LLM grade", ylabel="human grade")
        ax.set_title("Confusion (colour: share of the human row)")
        fig.colorbar(im, ax=ax, fraction=0.046)
        return _svg(fig)


def _defined(value: Any) -> bool:
    """A number that can be drawn: not None and not NaN (a missing value is never drawn as 0)."""
    return value is not None and value == value


def _na_labels(ax: Any, xs: list[float]) -> None:
    """Write "n/a" on the axis line at each x whose value is undefined (no bar drawn there)."""
    for x in xs:
        ax.annotate(
            "n/a",
            (x, 0),
            xycoords=("data", "axes fraction"),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            va="bottom",
            color="grey",
        )


def distributions_svg(dist: Mapping[str, Any]) -> str:
    """Grouped bars: share of each grade, human beside LLM; an undefined share is labelled n/a."""
    grades = [float(g) for g in dist["grades"]]
    with _axes(4.6, 3.2) as (fig, ax):
        missing: list[float] = []
        for shift, values, label, colour in (
            (-0.2, dist["human"], "human", HUMAN_COLOUR),
            (0.2, dist["llm"], "LLM", LLM_COLOUR),
        ):
            xs = [g + shift for g, v in zip(grades, values, strict=True) if _defined(v)]
            ys = [float(v) for v in values if _defined(v)]
            ax.bar(xs, ys, width=0.4, label=label, color=colour)
            missing += [g + shift for g, v in zip(grades, values, strict=True) if not _defined(v)]
        _na_labels(ax, missing)
        ax.set_xticks(grades, [str(int(g)) for g in grades])
        ax.set(xlabel="grade", ylabel="share of pairs", title="Grade distributions")
        ax.legend()
        return _svg(fig)


def bias_svg(rows: Sequence[Mapping[str, Any]], xlabel: str, title: str) -> str:
    """Bars of mean bias (LLM - human) per bucket; above zero is lenient. A bucket whose bias is
    undefined gets no bar and an n/a label."""
    labels = [str(r["bucket"]) for r in rows]
    shown = [i for i, r in enumerate(rows) if _defined(r["mean_bias"])]
    values = [float(rows[i]["mean_bias"]) for i in shown]
    with _axes(4.6, 3.2) as (fig, ax):
        colours = [LLM_COLOUR if v >= 0 else HUMAN_COLOUR for v in values]
        ax.bar(shown, values, color=colours)
        ax.axhline(0, color="black", linewidth=0.8)
        _na_labels(ax, [float(i) for i in range(len(rows)) if i not in shown])
        ax.set_xticks(range(len(rows)), labels)
        ax.set(xlabel=xlabel, ylabel="mean bias (LLM - human)", title=title)
        return _svg(fig)


def systems_svg(per_system: Sequence[Mapping[str, Any]], measure: str) -> str:
    """Scatter of each run's score under human (x) and LLM (y) labels, with the diagonal. A run
    with an undefined score is not plotted; it is listed as n/a under the picture."""
    drawn = [r for r in per_system if _defined(r["human"]) and _defined(r["llm"])]
    undefined = [str(r["run"]) for r in per_system if r not in drawn]
    x = np.asarray([float(r["human"]) for r in drawn], dtype=np.float64)
    y = np.asarray([float(r["llm"]) for r in drawn], dtype=np.float64)
    with _axes(4.6, 4.0) as (fig, ax):
        ax.scatter(x, y, color=LLM_COLOUR, zorder=3)
        for r, xi, yi in zip(drawn, x, y, strict=True):
            ax.annotate(str(r["run"]), (xi, yi), textcoords="offset points", xytext=(4, 4))
        lo = float(min(x.min(), y.min())) if x.size else 0.0
        hi = float(max(x.max(), y.max())) if x.size else 1.0
        pad = (hi - lo) * 0.05 or 0.05
        ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="grey", linestyle="--")
        ax.set(xlabel=f"{measure}, human labels", ylabel=f"{measure}, LLM labels")
        ax.set_title("Systems: human vs LLM labels")
        if undefined:
            ax.text(
                0.02,
                0.98,
                "n/a (not plotted): " + ", ".join(undefined),
                transform=ax.transAxes,
                ha="left",
                va="top",
                color="grey",
            )
        return _svg(fig)
