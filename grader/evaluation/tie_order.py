"""Ranks in ir_measures' order for RR@k and Judged@k (`ties=asc`): score descending in double
precision, ties by doc id ascending, where trec_eval breaks them descending.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd


def ascending_ties(run: pd.DataFrame) -> pd.DataFrame:
    """The run [query_id, doc_id, score, ...] with `rank` in ir_measures' order: per query,
    score descending in double precision, equal scores by doc id ascending (code points)."""
    keyed = run[["query_id", "doc_id", "score"]].assign(
        query_id=run["query_id"].astype(str),
        doc_id=run["doc_id"].astype(str),
        score=run["score"].astype(np.float64),
    )
    ordered = keyed.sort_values(
        ["query_id", "score", "doc_id"], ascending=[True, False, True], kind="stable"
    )
    ranks = ordered.groupby("query_id", sort=False).cumcount() + 1
    return run.assign(rank=ranks.reindex(run.index).to_numpy(dtype=np.int64))
