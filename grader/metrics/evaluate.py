"""The vectorised qrels x run evaluator. `missing="zero"` (default, trec_eval -c): every qrels
query counts, one the run does not answer scores 0; `missing="skip"` (trec_eval's default): only
queries in both. Run queries the qrels lack are ignored, as by trec_eval."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from grader.errors import RelgradeWarning
from grader.metrics import registry
from grader.metrics.judged_rows import Ranked
from grader.metrics.measures import Measure, is_summed, resolve_thresholds
from grader.metrics.rank_order import Precision, query_order

if TYPE_CHECKING:  # pandas only where a frame is asked for: `relgrade evaluate` never imports it
    import pandas as pd

Missing = Literal["zero", "skip"]


def evaluate(
    qrels: pd.DataFrame,
    run: pd.DataFrame,
    measures: Sequence[str | Measure],
    *,
    missing: Missing = "zero",
    precision: Precision = "float32",
) -> pd.DataFrame:
    """Score `run` (with `rank`, or `score` ranked here in `precision`) against `qrels`: a long
    frame [query_id, measure, value]. A name without `(rel=N)` gets the threshold the qrels call for
    (an inferred 1 is a RelgradeWarning). attrs: `missing`, `n_queries`, `qrels_queries`,
    `unjudged_queries`."""
    from grader.metrics.join_arrow import join_run, judgments_of  # Arrow: never for `score`

    judged = judgments_of(qrels)
    top = int(judged.sorted_grades.max()) if len(judged.sorted_grades) else None
    parsed, lines = resolve_thresholds(measures, top, typed=False)
    for line in lines:
        warnings.warn(line, RelgradeWarning, stacklevel=2)
    ranked = join_run(judged, run, precision=precision, depth=depth_needed(parsed))
    return score(ranked, parsed, missing=missing).frame()


def depth_needed(measures: Sequence[Measure]) -> int | None:
    """How deep into each ranking the measures look: the deepest cutoff when every measure has
    one, else None (the whole ranking)."""
    cutoffs = [m.cutoff for m in measures]
    if not cutoffs or not all(cutoffs) or any(m.judged_only for m in measures):
        return None  # no cutoff somewhere, or a condensed top k that may reach below rank k
    return max(c for c in cutoffs if c is not None)


@dataclass(frozen=True)
class Scores:
    """Per-query values of one run: `values[i, j]` is measure i on query `query_ids[j]`; the other
    fields mean what `evaluate`'s frame attrs mean."""

    query_ids: list[str]
    measures: list[str]
    values: npt.NDArray[np.float64]
    missing: list[str]
    qrels_queries: int
    unjudged_queries: list[str]

    @property
    def n_queries(self) -> int:
        return len(self.query_ids)

    def means(self) -> list[tuple[str, float]]:
        """(measure, mean over the queries) in measure order, as `mean_scores` gives them."""
        return [(m, _aggregate(m, row)) for m, row in zip(self.measures, self.values, strict=True)]

    def frame(self) -> pd.DataFrame:
        """The long frame [query_id, measure, value] of `evaluate`, with its attrs."""
        import pandas as pd

        n = self.n_queries
        frame = pd.DataFrame(
            {
                "query_id": pd.Series(
                    np.tile(np.asarray(self.query_ids, dtype=object), len(self.measures)), dtype=str
                ),
                "measure": pd.Series(np.repeat(self.measures, n), dtype=str),
                "value": self.values.ravel(),
            }
        )
        frame.attrs.update(missing=list(self.missing), n_queries=n, measures=list(self.measures))
        frame.attrs.update(qrels_queries=self.qrels_queries)
        frame.attrs["unjudged_queries"] = list(self.unjudged_queries)
        return frame


def _aggregate(measure: str, values: npt.NDArray[np.float64]) -> float:
    """A count's exact sum, any other measure's exact mean (NaN over no queries)."""
    return math.fsum(values.tolist()) if is_summed(measure) else exact_mean(values)


def score(ranked: Ranked, measures: Sequence[Measure], *, missing: Missing = "zero") -> Scores:
    """Every measure on every query of a joined run (see `evaluate` for `missing`)."""
    if missing not in ("zero", "skip"):
        raise ValueError(f"missing must be 'zero' or 'skip', not {missing!r}")
    answered = ranked.returned > 0
    keep = answered if missing == "skip" else np.ones(ranked.n_queries, dtype=bool)
    qids = np.asarray(ranked.query_ids, dtype=object)[keep]
    listed = query_order(list(qids))  # numeric ids by number, like calibrate's per-query lists
    qids = qids[listed]
    columns: dict[str, npt.NDArray[np.float64]] = {}
    condensed = ranked.condensed() if any(m.judged_only for m in measures) else ranked
    for measure in measures:
        kernel = registry.get(measure.name).compute
        values = kernel(measure, condensed if measure.judged_only else ranked)
        columns[str(measure)] = np.where(answered, values, 0.0)[keep][listed]
    values = (
        np.stack(list(columns.values())) if columns else np.zeros((0, len(qids)), dtype=np.float64)
    )
    return Scores(
        query_ids=[str(q) for q in qids],
        measures=list(columns),
        values=np.asarray(values, dtype=np.float64),
        missing=[q for q, a in zip(ranked.query_ids, answered, strict=True) if not a],
        qrels_queries=ranked.n_queries,
        unjudged_queries=list(ranked.unjudged_queries),
    )


def mean_scores(per_query: pd.DataFrame) -> pd.DataFrame:
    """The mean of each measure over the queries of an `evaluate` frame: [measure, value]; counts
    (NumRet, NumRel, NumRelRet) summed as by trec_eval. Exact sums (`math.fsum`): ties stay ties."""
    import pandas as pd

    order = per_query.attrs.get("measures") or [str(m) for m in pd.unique(per_query["measure"])]
    groups = dict(tuple(per_query.groupby("measure", sort=False)["value"]))
    values = [_aggregate(m, groups[m].to_numpy() if m in groups else np.zeros(0)) for m in order]
    frame = pd.DataFrame({"measure": pd.Series(order, dtype=str), "value": values})
    frame.attrs.update(per_query.attrs)
    return frame


def exact_mean(values: npt.ArrayLike) -> float:
    """The mean of `values` from an exact sum (`math.fsum`): independent of their order, so
    equal multisets of per-query scores give equal means (ties between systems stay ties)."""
    flat = np.asarray(values, dtype=np.float64).ravel()
    return math.fsum(flat.tolist()) / flat.size if flat.size else float("nan")
