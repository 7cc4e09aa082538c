"""The corrected difference between two runs' filled scores, estimated jointly (the same
imputations, overlap pairs and queries) and combined as one run's score is (`combine`): what
the runs share cancels, so its interval is narrower than either run's. Queries are not
resampled (`evaluate --baseline`'s paired test answers that question).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

from grader.evaluation.fill.interval import Interval, combine, first_order
from grader.metrics.measures import Measure

Float = npt.NDArray[np.float64]

METHOD = "difference of the corrected filled scores, on shared imputations and overlap pairs"


def corrected_differences(
    effects: Mapping[str, tuple[Float, Float]],
    baseline: str,
    measures: Sequence[Measure],
    weights: Float,
    holes: int,
    *,
    level: float = 0.95,
    refused: Mapping[str, Mapping[str, str]] | None = None,
) -> dict[str, dict[str, Interval]]:
    """Per run other than `baseline` and measure: the corrected difference and its `level` interval,
    from `effects` (`corrected_interval(effects_out=...)`); none where either run was `refused`.
    """
    z = NormalDist().inv_cdf(0.5 + level / 2.0)
    base_means, base_effects = effects[baseline]
    skip = refused or {}
    out: dict[str, dict[str, Interval]] = {}
    for run, (means, run_effects) in effects.items():
        if run == baseline:
            continue
        est, var = combine(
            means - base_means, run_effects - base_effects, weights, holes, first_order(measures)
        )
        names = [str(m) for m in measures]
        out[run] = {
            name: Interval(e, e - z * s, e + z * s, level, len(weights), METHOD)
            for name, e, s in zip(names, est.tolist(), np.sqrt(var).tolist(), strict=True)
            if name not in skip.get(run, {}) and name not in skip.get(baseline, {})
        }
    return out


def p_value(interval: Interval) -> float:
    """The two-sided p-value of "no difference" from a difference's normal interval (the
    z-test its interval inverts); 1.0 for an interval of no width around 0."""
    dist = NormalDist()
    half = interval.high - interval.estimate
    se = half / dist.inv_cdf(0.5 + interval.level / 2.0)
    if se <= 0:
        return 1.0 if interval.estimate == 0 else 0.0
    return 2.0 * (1.0 - dist.cdf(abs(interval.estimate) / se))
