"""Where the TREC DL 2019 data lives, trec_eval's ranking order, and a run writer."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from grader.errors import InputError
from grader.io.files import atomic_write
from grader.io.trec import _check_ids
from grader.metrics.rank_order import rank_order, ranks_within
from tests.helpers.fill_data import DATA

DL2019 = DATA  # beside the repository or beside the folder of worktrees


def trec_order(docs: dict[str, float]) -> list[str]:
    """trec_eval's ranking: float32 score descending, then doc id descending."""
    return sorted(docs, key=lambda d: (np.float32(docs[d]), d), reverse=True)


def write_run(path: str | Path, frame: pd.DataFrame, tag: str) -> None:
    """Write [query_id, doc_id, score] as a TREC run, atomically, in trec_eval's order with ranks
    1..n (so the rank column agrees with what readers recompute).
    """
    p = Path(path)
    if not tag or re.search(r"\s", tag):
        raise InputError(f"run tag {tag!r} must be one non-empty word", path=p)
    _check_ids(frame, ("query_id", "doc_id", "score"), p)
    scores = pd.to_numeric(frame["score"], errors="coerce").to_numpy(dtype=np.float64)
    if not np.all(np.isfinite(scores)):
        raise InputError("scores must be finite numbers", path=p)
    qids = frame["query_id"].astype(str).reset_index(drop=True)
    qcodes, _ = pd.factorize(qids)
    docs = frame["doc_id"].astype(str).reset_index(drop=True)
    order = rank_order(qcodes, scores, docs, "float64")
    out = pd.DataFrame(
        {
            "query_id": qids.take(order).reset_index(drop=True),
            "q0": "Q0",
            "doc_id": docs.take(order).reset_index(drop=True),
            "rank": ranks_within(qcodes[order]),
            "score": scores[order],
            "tag": tag,
        }
    )
    with atomic_write(p) as fh:
        out.to_csv(fh, sep=" ", header=False, index=False, lineterminator="\n")
