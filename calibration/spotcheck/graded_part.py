"""A sample graded only in part: which graded pairs are still a design sample, and with what pi.

A manifest's inclusion probabilities are those of the whole sample (pi = L / N for L pairs drawn
uniformly from N). When people graded n < L of them, weighting the n by that pi gives the
finite-population correction of L pairs, not of n: the interval is too short (85-87% coverage for
the first 100-300 grades of a 2,000-pair sample of 4,423 pairs; bench/calibrate_coverage.py).

- uniform: the manifest lists the pairs in their random draw order, and the first n of a uniform
  random order are themselves a uniform sample, pi = n / N. The fixed-n interval takes the graded
  prefix (the pairs before the first one not graded; later grades count once the gap is filled,
  as for the confidence sequence) with that pi.
- active: a prefix of the order is a sample of the sequential design, which the confidence
  sequence and its Des Raj fixed-n figure use (`calibration.stats.confseq`); the manifest's
  inclusion probabilities (of the whole sample) are not used.
- every other design (stratified, uncertainty, low, query-balanced, whole queries): the graded
  part has no known inclusion probabilities, so no fixed-n interval is given and the caution
  says why (grade the rest of the sample, or draw a uniform or active one, whose prefixes are
  samples).
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
