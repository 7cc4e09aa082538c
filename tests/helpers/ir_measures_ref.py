"""Qrels and runs as dicts, written as TREC files, and relgrade's measure names in ir_measures'
spelling: what the ir_measures cross-checks share."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tests.helpers.trec import write_run

GAINS = "{0:0,1:1,2:3,3:7}"
"""A gain map in ir_measures' spelling: trec_eval's exponential gains of grades 0..3."""

Qrels = dict[str, dict[str, int]]
Run = dict[str, dict[str, float]]
Values = dict[tuple[str, str], float]


def frames(qrels: Qrels, run: Run) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Qrels and run dicts as the frames `evaluate` takes."""
    q = pd.DataFrame(
        [(qid, d, g) for qid, docs in qrels.items() for d, g in docs.items()],
        columns=["query_id", "doc_id", "grade"],
    )
    r = pd.DataFrame(
        [(qid, d, s) for qid, docs in run.items() for d, s in docs.items()],
        columns=["query_id", "doc_id", "score"],
    )
    return q, r


def irm_name(name: str) -> str:
    """relgrade's printed name in ir_measures' spelling (only exponential gain differs)."""
    return name.replace("gain=exp", "dcg='exp-log2'")


def write_trec(folder: Path, qrels: Qrels, run: Run) -> tuple[Path, Path]:
    """qrels.txt and run.txt in `folder`."""
    q, r = frames(qrels, run)
    (folder / "qrels.txt").write_text(
        "".join(f"{a} 0 {b} {c}\n" for a, b, c in q.itertuples(index=False))
    )
    write_run(folder / "run.txt", r, "test")
    return folder / "qrels.txt", folder / "run.txt"
