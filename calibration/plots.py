"""The report's pictures as inline SVG strings (matplotlib's Figure API with no pyplot state;
no files, nothing fetched): confusion heatmap, the two grade distributions, bias by length,
systems' scores.

SVG keeps the report one self-contained file that prints and zooms sharply. Text stays text
(`svg.fonttype = none`), so a browser test can read the numbers inside the pictures.
"""

from __future__ import annotations

import io
import re
from typing import Any

import numpy as np
from matplotlib import rc_context
from matplotlib.figure import Figure

STYLE: dict[Any, Any] = {"svg.fonttype": "none", "svg.hashsalt": "relgrade", "font.size": 10}
HUMAN_COLOUR = "#4C72B0"
LLM_COLOUR = "#DD8452"


def _svg(fig: Figure) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    # matplotlib's RDF metadata names web vocabularies; the picture needs none of it
    return re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.DOTALL)


def confusion_svg(confusion: list[list[float]]) -> str:
    """Heatmap of the confusion matrix: rows human grade, columns LLM grade, counts written in."""
    c = np.asarray(confusion, dtype=np.float64)
    share = c / c.sum(axis=1, keepdims=True).clip(min=1e-12)
    with rc_context(STYLE):
        fig = Figure(figsize=(4.2, 3.6), layout="constrained")
        ax = fig.subplots()
        im = ax.imshow(share, cmap="Blues", vmin=0, vmax=1)
        for h in range(c.shape[0]):
            for m in range(c.shape[1]):
                colour = "white" if share[h, m] > 0.6 else "black"
                label = f"{c[h, m]:.0f}" if float(c[h, m]).is_integer() else f"{c[h, m]:.1f}"
                ax.text(m, h, label, ha="center", va="center", color=colour)
        ax.set_xticks(range(4), [str(g) for g in range(4)])
        ax.set_yticks(range(4), [str(g) for g in range(4)])
        ax.set_xlabel("LLM grade")
        ax.set_ylabel("human grade")
        ax.set_title("Confusion (colour: share of the human row)")
        fig.colorbar(im, ax=ax, fraction=0.046)
        return _svg(fig)


def distributions_svg(dist: dict[str, Any]) -> str:
    """Grouped bars: share of each grade, human beside LLM."""
    grades = np.asarray(dist["grades"])
    human = np.asarray([x or 0.0 for x in dist["human"]])
    llm = np.asarray([x or 0.0 for x in dist["llm"]])
    with rc_context(STYLE):
        fig = Figure(figsize=(4.6, 3.2), layout="constrained")
        ax = fig.subplots()
        ax.bar(grades - 0.2, human, width=0.4, label="human", color=HUMAN_COLOUR)
        ax.bar(grades + 0.2, llm, width=0.4, label="LLM", color=LLM_COLOUR)
        ax.set_xticks(grades, [str(g) for g in grades])
        ax.set_xlabel("grade")
        ax.set_ylabel("share of pairs")
        ax.set_title("Grade distributions")
        ax.legend()
        return _svg(fig)


def bias_svg(rows: list[dict[str, Any]], xlabel: str, title: str) -> str:
    """Bars of mean bias (LLM - human) per bucket; above zero is lenient."""
    labels = [str(r["bucket"]) for r in rows]
    values = np.asarray([r["mean_bias"] or 0.0 for r in rows])
    with rc_context(STYLE):
        fig = Figure(figsize=(4.6, 3.2), layout="constrained")
        ax = fig.subplots()
        colours = [LLM_COLOUR if v >= 0 else HUMAN_COLOUR for v in values]
        ax.bar(range(len(values)), values, color=colours)
        ax.axhline(0, color="black", linewidth=0.8)
        ax.set_xticks(range(len(values)), labels)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("mean bias (LLM - human)")
        ax.set_title(title)
        return _svg(fig)


def systems_svg(per_system: list[dict[str, Any]], measure: str) -> str:
    """Scatter of each run's score under human (x) and LLM (y) labels, with the diagonal."""
    x = np.asarray([r["human"] or 0.0 for r in per_system])
    y = np.asarray([r["llm"] or 0.0 for r in per_system])
    with rc_context(STYLE):
        fig = Figure(figsize=(4.6, 4.0), layout="constrained")
        ax = fig.subplots()
        ax.scatter(x, y, color=LLM_COLOUR, zorder=3)
        for r, xi, yi in zip(per_system, x, y, strict=True):
            ax.annotate(str(r["run"]), (xi, yi), textcoords="offset points", xytext=(4, 4))
        lo = float(min(x.min(), y.min())) if x.size else 0.0
        hi = float(max(x.max(), y.max())) if x.size else 1.0
        pad = (hi - lo) * 0.05 or 0.05
        ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], color="grey", linestyle="--")
        ax.set_xlabel(f"{measure}, human labels")
        ax.set_ylabel(f"{measure}, LLM labels")
        ax.set_title("Systems: human vs LLM labels")
        return _svg(fig)
