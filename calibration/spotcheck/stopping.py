"""When people may stop grading: the relevant share's confidence sequence over the graded prefix of
the sample's order, one function for `calibrate` and the annotation page, so both show the same
numbers. Grades past a gap wait for it to be filled (a skipped hard pair would bias the share).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from calibration.spotcheck.manifest import Manifest
from calibration.stats.confseq import TARGET, Sequence, share_sequence

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
    for t, pair in enumerate(order.pairs):
        if pair not in human:
            return t
    return len(order.pairs)


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
    """How many more grades likely bring the half-width to `target`, at most the pairs not yet
    graded (`population - n`), and a note when the sequence would need more than that: then
    grading every remaining pair (a census) is what gives the share."""
    more = seq.more_for(target)
    left = max(population - seq.n, 0)
    if more <= left:
        return more, None
    return left, (
        f"the sequence would need {more} more grades to reach a half-width of {target:g}, more "
        f"than the {left} pair(s) left of {population}: grading them all gives the share exactly"
    )
