"""Where the LLM's grades lean (LLM minus human, positive = lenient): distributions, bias by length
and rank, a verdict in plain words (at the matching split when people graded 0/1 and the LLM
0..3), and whether the judge's own confidence (from logprobs) tracks agreement."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from calibration.stats.agreement import percentile_interval, resampled_confusions, to_float
from grader.metrics.kappa import FloatArray, confusion_matrix, grouped_confusion, kappa, ratio
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


def spread_sentences(
    by_length: list[dict[str, Any]] | None, by_rank: list[dict[str, Any]] | None
) -> str:
    """What the verdict adds on how the bias moves across document lengths and ranks: a
    sentence for each whose spread is LENIENCY_MARGIN or more."""
    text = ""
    for rows, what, prefix in ((by_length, "document length", ""), (by_rank, "rank", "rank ")):
        known = [r for r in rows or [] if r["mean_bias"] is not None]
        if len(known) < 2:
            continue
        lo = min(known, key=lambda r: r["mean_bias"])
        hi = max(known, key=lambda r: r["mean_bias"])
        if hi["mean_bias"] - lo["mean_bias"] >= LENIENCY_MARGIN:
            text += (
                f" By {what}, the bias ranges from {lo['mean_bias']:+.2f} ({prefix}{lo['bucket']}) "
                f"to {hi['mean_bias']:+.2f} ({prefix}{hi['bucket']})."
            )
    return text


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


def is_binary_against_graded(human_grades: npt.ArrayLike, llm_grades: npt.ArrayLike) -> bool:
    """True when every human grade is 0 or 1 and the LLM used a grade above 1."""
    h = np.asarray(human_grades, dtype=np.int64)
    m = np.asarray(llm_grades, dtype=np.int64)
    return bool(h.size and m.size and h.max() <= 1 and m.max() >= 2)


def _binary_figures(c: FloatArray) -> dict[str, FloatArray]:
    exact = ratio(c[..., 0, 0] + c[..., 1, 1], c.sum(axis=(-2, -1)))
    return {"exact_agreement": exact, "cohen_kappa": kappa(c, "none")}


def binary_comparison(
    human: npt.ArrayLike,
    llm: npt.ArrayLike,
    threshold: int,
    *,
    weights: npt.ArrayLike | None = None,
    query_codes: npt.ArrayLike | None = None,
    n_queries: int = 0,
    n_bootstrap: int = 0,
    seed: int = 0,
) -> dict[str, Any]:
    """Binary human grades against LLM grades split at `threshold`: the weighted 2x2
    confusion, agreement, kappa, both relevant shares, and query-bootstrap `intervals`."""
    h = (np.asarray(human, dtype=np.int64) >= 1).astype(np.int64)
    m = (np.asarray(llm, dtype=np.int64) >= threshold).astype(np.int64)
    c = confusion_matrix(h, m, 2, weights)
    figures = _binary_figures(c)
    total = float(c.sum())
    out: dict[str, Any] = {
        "split": f"human 1 = relevant; LLM relevant when grade >= {threshold}",
        "threshold": threshold,
        "confusion": [[float(v) for v in row] for row in c],
        "exact_agreement": to_float(figures["exact_agreement"]),
        "cohen_kappa": to_float(figures["cohen_kappa"]),
        "human_relevant": to_float(c[1].sum() / total) if total > 0 else None,
        "llm_relevant": to_float(c[:, 1].sum() / total) if total > 0 else None,
        "intervals": {},
    }
    if query_codes is not None and n_bootstrap > 0 and n_queries > 0:
        cells = grouped_confusion(query_codes, n_queries, h, m, 2, weights)
        stacked = resampled_confusions(cells, n_bootstrap, seed)
        out["intervals"] = {
            key: percentile_interval(values) for key, values in _binary_figures(stacked).items()
        }
    return out


def scale_warning(threshold: int, with_runs: bool) -> str:
    """Why the figures on the 0..3 scale mislead here, and what to read instead."""
    text = (
        "human grades are binary (0/1) but LLM grades use 0..3: the scales differ. Read the "
        f"binary comparison (human 1 = relevant, LLM relevant at grade >= {threshold}; "
        "--threshold moves it). The 0..3 figures (confusion, weighted kappas, alpha, mean bias, "
        "binary kappa at 2 or 3) set a human 1 beside an LLM 1 and are kept for reference only"
    )
    if with_runs:
        text += (
            "; system scores apply the measure's one threshold to both label sets, where a human "
            "1 counts as relevant only at rel=1, so they are not comparable here"
        )
    return text


def scales_verdict(binary: dict[str, Any]) -> dict[str, Any]:
    """The verdict when scales differ: the binary comparison, not a mean bias across scales."""
    t = binary["threshold"]
    parts = [
        "Human grades are binary (0/1) and the LLM's are 0..3, so no mean bias is claimed.",
        f"At the matching split (human 1 = relevant, LLM grade >= {t}) they agree on "
        f"{_pct(binary['exact_agreement'])} of pairs, Cohen's kappa {_num(binary['cohen_kappa'])}.",
    ]
    if binary["human_relevant"] is not None and binary["llm_relevant"] is not None:
        parts.append(
            f"The LLM calls {binary['llm_relevant']:.0%} of pairs relevant (grade >= {t}), "
            f"people {binary['human_relevant']:.0%} (grade 1)."
        )
    return {"label": "scales_differ", "text": " ".join(parts)}


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _num(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"
