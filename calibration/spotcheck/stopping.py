"""When people may stop grading, and what a sample graded in part stands for: one place for
`calibrate` and the annotation page (`LiveStopping`), so both show the same numbers. Grades past a
gap wait for it to be filled (a skipped hard pair would bias the share)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from calibration.join import PairedGrades, pair_keys, relevance_prediction
from calibration.spotcheck.manifest import Manifest
from calibration.stats.confseq import TARGET, Sequence, share_sequence
from calibration.stats.ppi import SampleDesign

Pair = tuple[str, str]


@dataclass(frozen=True)
class DrawOrder:
    """The sample's pairs in grading order, each one's draw probability, and the population."""

    pairs: list[Pair]
    p: np.ndarray
    population: int
    variance_factor: float = 1.0

    @classmethod
    def from_manifest(cls, manifest: Manifest) -> DrawOrder | None:
        """The order of a uniform or active sample; None for other designs."""
        if not manifest.sequential():
            return None
        return cls(
            pairs=[(m.query_id, m.doc_id) for m in manifest.pairs],
            p=np.array([m.draw_probability for m in manifest.pairs], dtype=np.float64),
            population=manifest.population,
            variance_factor=manifest.variance_factor or 1.0,
        )


def graded_prefix(order: DrawOrder, human: Mapping[Pair, int]) -> int:
    """How many pairs from the start of the order are graded."""
    return next((t for t, pair in enumerate(order.pairs) if pair not in human), len(order.pairs))


def stopping_figures(
    order: DrawOrder,
    human: Mapping[Pair, int],
    llm: Mapping[Pair, int],
    *,
    threshold: int,
    human_threshold: int | None = None,
    predictions: Mapping[Pair, float] | None = None,
) -> tuple[Sequence | None, dict[str, Any]]:
    """The sequence over the graded prefix and the figures to show (`cs`, `more_for_0_05`, ...),
    or None and a `cs_note` saying why; `predictions`: the LLM's P(relevant) of every pair."""
    human_at = threshold if human_threshold is None else human_threshold
    if len(llm) != order.population:
        return None, {
            "cs_note": f"no confidence sequence: the sample was drawn from {order.population} "
            f"LLM-graded pairs and the LLM grades given hold {len(llm)}; give the judgments the "
            "sample was drawn from"
        }
    t = graded_prefix(order, human)
    if t < 2:
        return None, {"cs_note": "no confidence sequence yet: grade the first pairs in order"}
    pairs = order.pairs[:t]
    missing = [pair for pair in pairs if pair not in llm]
    if missing:
        return None, {"cs_note": f"no confidence sequence: {missing[0]} has no LLM grade"}
    pred = predictions or {pair: float(g >= threshold) for pair, g in llm.items()}
    seq = share_sequence(
        [human[pair] >= human_at for pair in pairs],
        [pred[pair] for pair in pairs],
        order.p[:t],
        [pred[pair] for pair in llm],
        order.variance_factor,
    )
    later = sum(1 for pair in order.pairs[t:] if pair in human)
    note = None
    if later:
        note = (
            f"the sequence uses the first {t} pairs of the sample's order; {later} later "
            f"grade(s) count once pair {t + 1} ({order.pairs[t][0]}, {order.pairs[t][1]}) is graded"
        )
    more, out_of_reach = more_within(seq, TARGET, order.population)
    if out_of_reach:
        note = "; ".join(filter(None, [note, out_of_reach]))
    figures: dict[str, Any] = {
        "cs": list(seq.cs),
        "more_for_0_05": more,
        "cs_estimate": seq.estimate,
        "cs_n": seq.n,
        "cs_note": note,
    }
    return seq, figures


def more_within(seq: Sequence, target: float, population: int) -> tuple[int, str | None]:
    """How many more grades likely bring the half-width to `target`, at most the pairs left, and
    a note when it would take more: then grading them all (a census) gives the share."""
    more = seq.more_for(target)
    left = max(population - seq.n, 0)
    if more <= left:
        return more, None
    return left, (
        f"the sequence would need {more} more grades to reach a half-width of {target:g}, more "
        f"than the {left} pair(s) left of {population}: grading them all gives the share exactly"
    )


@dataclass(frozen=True)
class GradedPart:
    """`graded` of the sample's `sampled` pairs are graded; `prefix` marks the paired rows of a
    uniform sample's graded prefix (itself a uniform sample, pi = t / N; None for other designs:
    the whole sample's pi would give too short an interval, bench/calibrate_coverage.py)."""

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
    keys = pair_keys(f)
    t = graded_prefix(order, dict.fromkeys(keys, 0))
    first = set(order.pairs[:t])
    mask = np.array([k in first for k in keys], dtype=bool)
    return GradedPart(paired.n, design.sampled, strategy, mask, t)


@dataclass
class LiveStopping:
    """Stopping figures for one sample and one population of LLM grades (`target` in (0, 1))."""

    order: DrawOrder
    llm: Mapping[Pair, int]
    _: KW_ONLY
    threshold: int = 2
    target: float = TARGET
    predictions: Mapping[Pair, float] | None = None

    @classmethod
    def from_frame(
        cls, order: DrawOrder, frame: pd.DataFrame, *, threshold: int = 2, target: float = TARGET
    ) -> LiveStopping:
        """From an LLM grades frame (`read_llm_grades`): grades, and P(relevant) where the
        judge gave a grade distribution, as `relgrade calibrate` takes them."""
        pairs = pair_keys(frame)
        pred = relevance_prediction(frame["grade"], frame, threshold)
        return cls(
            order,
            dict(zip(pairs, frame["grade"].astype(int), strict=True)),
            threshold=threshold,
            target=target,
            predictions=dict(zip(pairs, pred.tolist(), strict=True)),
        )

    def figures(self, grades: Mapping[Pair, int]) -> dict[str, Any]:
        """What the page shows, as JSON."""
        seq, figures = stopping_figures(
            order=self.order,
            human=grades,
            llm=self.llm,
            threshold=self.threshold,
            predictions=self.predictions,
        )
        out: dict[str, Any] = {"target": self.target, "note": figures.get("cs_note")}
        if seq is None:
            return {**out, "available": False}
        return {
            **out,
            "available": True,
            "n": seq.n,
            "estimate": seq.estimate,
            "cs": list(seq.cs),
            "half_width": seq.half_width,
            "may_stop": seq.half_width <= self.target,
            "more": more_within(seq, self.target, self.order.population)[0],
            "more_for_0_05": figures["more_for_0_05"],
        }
