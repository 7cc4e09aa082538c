"""Where the LLM's grades lean (LLM minus human, positive = lenient): distributions, bias by
document length and by rank, a verdict in plain words; and whether the judge's own confidence
(from logprobs) tracks its agreement with people."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from calibration.stats.agreement import to_float
from grader.models import GRADES

LENIENCY_MARGIN = 0.1
"""A mean bias of this many grade points or more is sizeable: lenient, strict or inconclusive
(see `verdict`); below it, balanced unless its interval says otherwise."""

RANK_BUCKETS: tuple[tuple[int, int], ...] = ((1, 1), (2, 3), (4, 10), (11, 20), (21, 100))


def _w(weights: npt.ArrayLike | None, n: int) -> npt.NDArray[np.float64]:
    return np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64)


def grade_distributions(
    human: npt.ArrayLike, llm: npt.ArrayLike, weights: npt.ArrayLike | None = None
) -> dict[str, Any]:
    """Share of each grade 0..3 on each side (weighted), side by side, with the counts."""
    h = np.asarray(human, dtype=np.int64)
    m = np.asarray(llm, dtype=np.int64)
    w = _w(weights, h.size)
    total = float(w.sum())
    out: dict[str, Any] = {"grades": list(GRADES)}
    for side, values in (("human", h), ("llm", m)):
        mass = np.bincount(values, weights=w, minlength=len(GRADES))
        out[side] = [to_float(x / total) if total > 0 else None for x in mass]
        out[f"{side}_counts"] = [int(x) for x in np.bincount(values, minlength=len(GRADES))]
    return out


def _group_bias(
    frame: pd.DataFrame, key: str, labels: list[tuple[str, Any, Any]]
) -> list[dict[str, Any]]:
    rows = []
    for label, lo, hi in labels:
        part = frame[frame[key] == label]
        if part.empty:
            continue
        w = part["weight"].to_numpy()
        rows.append(
            {
                "bucket": label,
                "low": lo,
                "high": hi,
                "n": len(part),
                "human_mean": to_float(np.average(part["human"], weights=w)),
                "llm_mean": to_float(np.average(part["llm"], weights=w)),
                "mean_bias": to_float(np.average(part["llm"] - part["human"], weights=w)),
            }
        )
    return rows


def _pairs_with(
    human: npt.ArrayLike,
    llm: npt.ArrayLike,
    weights: npt.ArrayLike | None,
    column: str,
    values: npt.ArrayLike,
) -> pd.DataFrame:
    """Paired grades, weights and one more per-pair value; pairs lacking the value are dropped."""
    h = np.asarray(human, dtype=np.float64)
    return pd.DataFrame(
        {
            "human": h,
            "llm": np.asarray(llm, dtype=np.float64),
            column: np.asarray(values, dtype=np.float64),
            "weight": _w(weights, h.size),
        }
    ).dropna(subset=[column])


def bias_by_length(
    human: npt.ArrayLike,
    llm: npt.ArrayLike,
    lengths: npt.ArrayLike,
    weights: npt.ArrayLike | None = None,
    *,
    bins: int = 5,
) -> list[dict[str, Any]]:
    """Mean bias per document-length quantile (characters, pd.qcut buckets, equal edges
    merged), shortest first; pairs of unknown length are left out."""
    frame = _pairs_with(human, llm, weights, "length", lengths)
    if frame.empty:
        return []
    codes, edges = pd.qcut(frame["length"], bins, labels=False, retbins=True, duplicates="drop")
    frame["bucket"] = [f"Q{int(c) + 1}" for c in codes]
    labels = [
        (f"Q{i + 1}", int(np.floor(edges[i])) + 1 if i else int(edges[0]), int(edges[i + 1]))
        for i in range(len(edges) - 1)
    ]
    return _group_bias(frame, "bucket", labels)


def bias_by_rank(
    human: npt.ArrayLike,
    llm: npt.ArrayLike,
    ranks: npt.ArrayLike,
    weights: npt.ArrayLike | None = None,
) -> list[dict[str, Any]]:
    """Mean bias per best-rank bucket (1, 2-3, 4-10, 11-20, 21-100, >100); NaN ranks (no run
    retrieved the pair) are left out."""
    frame = _pairs_with(human, llm, weights, "rank", ranks)
    if frame.empty:
        return []
    buckets = [*RANK_BUCKETS, (RANK_BUCKETS[-1][1] + 1, None)]
    names = [f"{lo}" if lo == hi else (f"{lo}-{hi}" if hi else f">{lo - 1}") for lo, hi in buckets]
    edges = [-np.inf] + [hi for _, hi in RANK_BUCKETS] + [np.inf]
    frame["bucket"] = pd.cut(frame["rank"], edges, labels=names).astype(str)
    return _group_bias(
        frame, "bucket", [(n, lo, hi) for n, (lo, hi) in zip(names, buckets, strict=True)]
    )


def verdict(
    mean_bias: float | None,
    interval: list[float | None] | None,
    human_relevant: float | None,
    llm_relevant: float | None,
    threshold: int = 2,
) -> dict[str, Any]:
    """lenient / strict (bias beyond +-LENIENCY_MARGIN, interval excludes 0), balanced (whole
    interval within the margin) or inconclusive, with a sentence giving the numbers. Without
    an interval the bias alone decides."""
    if mean_bias is None:
        return {"label": "unknown", "text": "No pair is graded on both sides."}
    lo, hi = (interval or [None, None])[:2]
    m = LENIENCY_MARGIN
    ci = ""
    excludes_zero, within = True, abs(mean_bias) < m
    if lo is not None and hi is not None:
        ci = f" (95% CI {lo:+.2f} to {hi:+.2f})"
        excludes_zero = lo > 0 or hi < 0
        within = -m < lo and hi < m
    if mean_bias >= m and excludes_zero:
        label = "lenient"
    elif mean_bias <= -m and excludes_zero:
        label = "strict"
    elif within:
        label = "balanced"
    else:
        label = "inconclusive"
    direction = "higher" if mean_bias >= 0 else "lower"
    average = f"on average {abs(mean_bias):.2f} points {direction} than people's{ci}"
    if label == "inconclusive":
        holds = "both 0 and biases" if not excludes_zero else "biases"
        text = (
            f"Whether the LLM judge is lenient or strict is inconclusive: its grades are "
            f"{average}; the interval holds {holds} of {m:.1f} points or more, "
            "so these data cannot say whether, or which way, the judge leans."
        )
    else:
        text = f"The LLM judge is {label}: its grades are {average}."
    if human_relevant is not None and llm_relevant is not None:
        text += (
            f" It calls {llm_relevant:.0%} of pairs relevant (grade >= {threshold}), "
            f"people {human_relevant:.0%}."
        )
    return {"label": label, "text": text, "margin": LENIENCY_MARGIN}


def spread_sentence(rows: list[dict[str, Any]], what: str, prefix: str = "") -> str | None:
    """One sentence on how the bias moves across buckets, or None when its spread is under
    LENIENCY_MARGIN."""
    known = [r for r in rows if r["mean_bias"] is not None]
    if len(known) < 2:
        return None
    lo = min(known, key=lambda r: r["mean_bias"])
    hi = max(known, key=lambda r: r["mean_bias"])
    if hi["mean_bias"] - lo["mean_bias"] < LENIENCY_MARGIN:
        return None
    return (
        f"By {what}, the bias ranges from {lo['mean_bias']:+.2f} ({prefix}{lo['bucket']}) "
        f"to {hi['mean_bias']:+.2f} ({prefix}{hi['bucket']})."
    )


def confidence_report(
    human: npt.ArrayLike,
    llm: npt.ArrayLike,
    confidence: npt.ArrayLike | None,
    expected: npt.ArrayLike | None,
    bins: int = 5,
) -> dict[str, Any] | None:
    """The confidence section, or None when the judge gave no probabilities (NaN confidences
    are left out of the bins)."""
    h = np.asarray(human, dtype=np.float64)
    m = np.asarray(llm, dtype=np.float64)
    out: dict[str, Any] = {}
    if confidence is not None:
        c = np.asarray(confidence, dtype=np.float64)
        known = np.isfinite(c)
        if known.sum() >= bins:
            frame = pd.DataFrame({"c": c[known], "right": (h == m)[known].astype(float)})
            frame["bin"] = pd.qcut(frame["c"].rank(method="first"), bins, labels=False)
            rows = []
            gap = 0.0
            for b in range(bins):
                part = frame[frame["bin"] == b]
                conf, acc = float(part["c"].mean()), float(part["right"].mean())
                gap += abs(conf - acc) * len(part)
                rows.append(
                    {
                        "bin": b + 1,
                        "n": len(part),
                        "mean_confidence": to_float(conf),
                        "exact_agreement": to_float(acc),
                    }
                )
            out["by_confidence"] = rows
            out["expected_calibration_error"] = to_float(gap / len(frame))
            out["n_with_confidence"] = int(known.sum())
    if expected is not None:
        e = np.asarray(expected, dtype=np.float64)
        known = np.isfinite(e)
        if known.any():
            out["expected_grade_mae"] = to_float(np.mean(np.abs(e[known] - h[known])))
            out["grade_mae"] = to_float(np.mean(np.abs(m[known] - h[known])))
    return out or None
