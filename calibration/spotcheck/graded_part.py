"""A sample graded only in part: which graded pairs are still a design sample, and with what pi.

The whole sample's pi would give the finite-population correction of the whole sample, an
interval too short (bench/calibrate_coverage.py). A uniform sample's graded prefix is itself a
uniform sample (pi = n / N); an active one's prefix is the sequential design's
(`calibration.stats.confseq`); any other part has no known pi, so no fixed-n interval.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from calibration.join import PairedGrades
from calibration.spotcheck.stopping import DrawOrder, graded_prefix
from calibration.stats.ppi_design import SampleDesign


@dataclass(frozen=True)
class GradedPart:
    """`graded` of the sample's `sampled` pairs are graded; `prefix` marks the paired rows of a
    uniform sample's graded prefix (None for other designs), `t` its length."""

    graded: int
    sampled: int
    strategy: str
    prefix: npt.NDArray[np.bool_] | None = None
    t: int = 0

    def caution(self) -> str:
        """What the interval rests on, or why there is none."""
        head = f"only {self.graded} of the sample's {self.sampled} pairs are graded"
        if self.prefix is not None and self.t < 2:
            return (
                f"{head}, and the first pairs of the sample's order are not: no interval until "
                "the first 2 pairs of the order are graded (grade in the order given)"
            )
        if self.prefix is not None:
            return (
                f"{head}: the interval uses the first {self.t} pairs of the sample's order, "
                f"themselves a uniform sample (pi = {self.t} / N), not the manifest's pi"
            )
        if self.strategy == "active":
            return (
                f"{head}: the interval and the confidence sequence use the graded prefix of the "
                "sample's order (the sequential design), not the manifest's pi"
            )
        if self.strategy == "uniform":
            return (
                f"{head}, and the manifest does not record the draw order, so the graded part "
                "is not known to be a prefix: no interval is given; grade the rest, or redraw "
                "the sample with `relgrade sample` (its manifest records the order)"
            )
        return (
            f"{head}: part of a {self.strategy} sample is not a sample with known inclusion "
            "probabilities, so no interval is given; grade the rest, or draw a uniform or "
            "active sample (any prefix of its order is a sample)"
        )


def graded_part(
    paired: PairedGrades, design: SampleDesign, order: DrawOrder | None
) -> GradedPart | None:
    """The graded part of a manifest's sample, or None when every sampled pair is graded (or
    there is no manifest)."""
    if design.source != "manifest" or design.sampled is None or paired.n >= design.sampled:
        return None
    strategy = design.strategy or ""
    part = GradedPart(paired.n, design.sampled, strategy)
    if strategy != "uniform" or order is None:
        return part
    f = paired.frame
    keys = list(zip(f["query_id"].tolist(), f["doc_id"].tolist(), strict=True))
    t = graded_prefix(order, dict.fromkeys(keys, 0))
    first = set(order.pairs[:t])
    mask = np.array([k in first for k in keys], dtype=bool)
    return GradedPart(paired.n, design.sampled, strategy, mask, t)
