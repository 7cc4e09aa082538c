"""Small collections whose holes are a run's top ranks (a new system's results), for the tests of
`evaluate --fill`'s refusals and of the holes-sample design."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class TopWorld:
    """The truth, people's qrels, the LLM's grades and the runs of one seeded world."""

    truth: pd.DataFrame
    human: pd.DataFrame
    llm: pd.DataFrame
    holes: pd.DataFrame  # the truth of the holes (the LLM graded them)
    runs: dict[str, pd.DataFrame]


def _qrels(rows: list[tuple[str, str, int]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["query_id", "doc_id", "grade"]).astype({"grade": "int64"})


def top_world(
    seed: int,
    queries: int = 6,
    docs: int = 20,
    top: int = 10,
    judged_to: int | None = None,
    also: int = 2,
    right: float = 0.7,
) -> TopWorld:
    """`queries` x `docs`; two runs rank by the truth plus noise; the pairs either run ranks in
    its top `top` are the holes (the LLM grades them), people judged the others up to rank
    `judged_to` of the first run (all by default; the rest nobody graded), and the LLM also graded
    `also` of people's pairs per query. The LLM gives the true grade with probability `right`,
    else a uniform one."""
    rng = np.random.default_rng(seed)
    truth: list[tuple[str, str, int]] = []
    runs: dict[str, list[tuple[str, str, float]]] = {"r0": [], "r1": []}
    for q in range(queries):
        grades = rng.choice(4, size=docs, p=[0.5, 0.2, 0.2, 0.1])
        for d in range(docs):
            truth.append((f"q{q}", f"d{q}-{d}", int(grades[d])))
        for name, noise in (("r0", 1.0), ("r1", 2.5)):
            score = grades + rng.normal(0, noise, docs)
            runs[name] += [(f"q{q}", f"d{q}-{d}", float(score[d])) for d in range(docs)]
    frames = {n: pd.DataFrame(r, columns=["query_id", "doc_id", "score"]) for n, r in runs.items()}
    full = _qrels(truth)
    rank = {
        n: f.groupby("query_id")["score"].rank(ascending=False, method="first").to_numpy()
        for n, f in frames.items()
    }
    is_hole = (rank["r0"] <= top) | (rank["r1"] <= top)
    judged = ~is_hole if judged_to is None else ~is_hole & (rank["r0"] <= judged_to)
    guess = rng.integers(0, 4, len(full))
    llm_grade = np.where(rng.random(len(full)) < right, full["grade"], guess)
    also_judged = np.zeros(len(full), dtype=bool)
    for q in full["query_id"].unique():
        pool = np.flatnonzero(judged & (full["query_id"] == q).to_numpy())
        also_judged[rng.choice(pool, size=min(also, len(pool)), replace=False)] = True
    llm = full[is_hole | also_judged].assign(grade=llm_grade[is_hole | also_judged])
    return TopWorld(
        truth=full,
        human=full[judged].reset_index(drop=True),
        llm=llm.reset_index(drop=True),
        holes=full[is_hole].reset_index(drop=True),
        runs=frames,
    )


def write_qrels(path: object, frame: pd.DataFrame) -> None:
    from pathlib import Path

    rows = frame[["query_id", "doc_id", "grade"]].itertuples(index=False)
    Path(str(path)).write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in rows))


def write_run(path: object, frame: pd.DataFrame, tag: str) -> None:
    from pathlib import Path

    ranked = frame.sort_values(["query_id", "score"], ascending=[True, False])
    ranked = ranked.assign(rank=ranked.groupby("query_id").cumcount() + 1)
    rows = ranked[["query_id", "doc_id", "rank", "score"]].itertuples(index=False)
    Path(str(path)).write_text("".join(f"{q} Q0 {d} {r} {s:.6f} {tag}\n" for q, d, r, s in rows))
