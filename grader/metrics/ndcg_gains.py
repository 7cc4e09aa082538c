"""nDCG with a custom gain map: ir_measures' `nDCG(gains={0:0,1:1,2:3,3:7})@k`.

gain(g) = gains.get(g, g) (as ir_measures and trec_eval), 0 for negative grades and unjudged
documents; IDCG ranks all the query's judgments by gain (a map need not keep the grades' order).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from grader.metrics._lists import Grades, check_k
from grader.metrics.judged_rows import Ranked
from grader.metrics.measures import Measure
from grader.metrics.rank_order import ranks_within
from grader.metrics.spellings import Gains


def mapped_gain(grade: int | None, gains: Gains) -> float:
    """The gain of one grade under the map (None, unjudged, gains 0)."""
    if grade is None or grade < 0:
        return 0.0
    return float(dict(gains).get(grade, grade))


def ndcg_with_gains(
    rels: Grades, ideal: Sequence[int], gains: Gains, k: int | None = None
) -> float:
    """nDCG of one graded list under a gain map; `ideal` is every judged grade of the query."""

    def dcg(values: list[float]) -> float:
        shown = values if k is None else values[:k]
        return sum(v / float(np.log2(i + 1)) for i, v in enumerate(shown, 1))

    check_k(k)
    best = dcg(sorted((mapped_gain(g, gains) for g in ideal), reverse=True))
    return dcg([mapped_gain(g, gains) for g in rels]) / best if best > 0 else 0.0


def _gains(grades: npt.NDArray[np.int64], gains: Gains) -> npt.NDArray[np.float64]:
    out = np.maximum(grades, 0).astype(np.float64)
    for grade, gain in gains:
        out[grades == grade] = gain
    return out


def compute(measure: Measure, ranked: Ranked) -> npt.NDArray[np.float64]:
    """nDCG under `measure.gains` per qrels query (vectorised)."""
    k = measure.cutoff
    sel = ranked.rank <= k if k is not None else np.ones(len(ranked.rank), dtype=bool)
    weights = _gains(ranked.grade, measure.gains) / np.log2(ranked.rank + 1.0)
    actual = ranked.per_query(sel, weights)
    ideal_gain = _gains(ranked.ideal_grade, measure.gains)
    order = np.lexsort((-ideal_gain, ranked.ideal_query))
    query, gain = ranked.ideal_query[order], ideal_gain[order]
    pos = ranks_within(query)
    keep = pos <= k if k is not None else np.ones(len(pos), dtype=bool)
    best = np.bincount(
        query[keep], weights=gain[keep] / np.log2(pos[keep] + 1.0), minlength=ranked.n_queries
    ).astype(np.float64)
    return np.divide(actual, best, out=np.zeros_like(actual), where=best > 0)
