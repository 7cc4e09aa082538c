"""When people graded 0/1 and the LLM 0..3, the 4x4 figures compare different scales; this module
detects it and compares at the matching split (LLM grade >= threshold): the 2x2 confusion, exact
agreement and kappa with query-bootstrap intervals, and both relevant shares.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from calibration.stats.agreement import to_float
from calibration.stats.bootstrap import percentile_interval, resampled_confusions
from grader.metrics.kappa import kappa

FloatArray = npt.NDArray[np.float64]


def is_binary_against_graded(human_grades: npt.ArrayLike, llm_grades: npt.ArrayLike) -> bool:
    """True when every human grade is 0 or 1 and the LLM used a grade above 1."""
    h = np.asarray(human_grades, dtype=np.int64)
    m = np.asarray(llm_grades, dtype=np.int64)
    return bool(h.size and m.size and h.max() <= 1 and m.max() >= 2)


def _binary_figures(c: FloatArray) -> dict[str, FloatArray]:
    total = c.sum(axis=(-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = np.where(total > 0, (c[..., 0, 0] + c[..., 1, 1]) / total, np.nan)
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
    h = np.asarray(human, dtype=np.int64) >= 1
    m = np.asarray(llm, dtype=np.int64) >= threshold
    w = np.ones(h.size) if weights is None else np.asarray(weights, dtype=np.float64)
    cell = h.astype(np.int64) * 2 + m.astype(np.int64)
    c = np.bincount(cell, weights=w, minlength=4).reshape(2, 2).astype(np.float64)
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
        codes = np.asarray(query_codes, dtype=np.int64)
        per_query = np.bincount(codes * 4 + cell, weights=w, minlength=n_queries * 4)
        cells = np.asarray(per_query, dtype=np.float64).reshape(n_queries, 2, 2)
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
