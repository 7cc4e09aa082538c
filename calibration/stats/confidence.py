"""Does the LLM's own confidence (from logprobs) mean anything? Exact agreement per confidence
quintile, the expected calibration error, and whether the expected grade comes closer to the
human grade than the hard grade."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from calibration.stats.agreement import to_float


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
