"""The figures the grading page shows after each grade: may people stop yet? They come from
`calibration.spotcheck.stopping`, as `relgrade calibrate`'s do, so both agree on the same grades.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from calibration.join import relevance_prediction
from calibration.spotcheck.stopping import DrawOrder, Pair, more_within, stopping_figures
from calibration.stats.confseq import TARGET


class LiveStopping:
    """Stopping figures for one sample and one population of LLM grades."""

    def __init__(
        self,
        order: DrawOrder,
        llm: Mapping[Pair, int],
        *,
        threshold: int = 2,
        target: float = TARGET,
        predictions: Mapping[Pair, float] | None = None,
    ) -> None:
        if not 0 < target < 1:
            raise ValueError(f"the target half-width must be in (0, 1), got {target}")
        self.order = order
        self.llm = dict(llm)
        self.threshold = threshold
        self.target = target
        self.predictions = None if predictions is None else dict(predictions)

    @classmethod
    def from_frame(
        cls, order: DrawOrder, frame: pd.DataFrame, *, threshold: int = 2, target: float = TARGET
    ) -> LiveStopping:
        """From an LLM grades frame (`read_llm_grades`): grades, and P(relevant) where the
        judge gave a grade distribution, as `relgrade calibrate` takes them."""
        pairs = list(zip(frame["query_id"].astype(str), frame["doc_id"].astype(str), strict=True))
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
