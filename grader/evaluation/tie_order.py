"""Ranks in ir_measures' order for RR@k and Judged@k: score descending, ties by doc id ascending.

trec_eval (and pytrec_eval, and so most of ir_measures) ranks equal scores by doc id
descending; ir_measures computes RR@k with MS MARCO's script and Judged@k with its own code,
which sort by (-score, doc id) in double precision, ties ascending. A measure written with
`ties=asc` (what `ir_measures.RR@10` becomes) is scored on the run ranked this way.
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
