"""The grades a set of lexical thresholds gives (a check on the fitted thresholds)."""

from __future__ import annotations

import numpy as np


def grades_for(scores: np.ndarray, thresholds: tuple[float, float, float]) -> np.ndarray:
    """The grades the thresholds give to `scores` (how many thresholds each score reaches)."""
    s = np.asarray(scores, dtype=np.float64)
    out: np.ndarray = (s[..., None] >= np.asarray(thresholds)).sum(axis=-1).astype(np.int64)
    return out
