"""A small collection with holes for the `evaluate --fill` tests: people's qrels, the LLM's
grades (on the holes and on some of people's pairs), the merged qrels, and two runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

MEASURES = ["nDCG@5", "P(rel=2)@5", "RR(rel=2)@5", "AP(rel=2)"]


def fill_world(tmp_path: Path, seed: int = 7) -> dict[str, Any]:
    """8 queries x 20 docs; people graded 60%, the LLM (right 70% of the time) the rest and
    some of people's pairs; two runs of 15 docs each."""
    rng = np.random.default_rng(seed)
    truth = {
        (f"q{q}", f"d{q}-{d}"): int(rng.choice(4, p=[0.5, 0.2, 0.2, 0.1]))
        for q in range(8)
        for d in range(20)
    }
    pairs = list(truth)
    judged = rng.random(len(pairs)) < 0.6
    human = {p: truth[p] for p, j in zip(pairs, judged, strict=True) if j}
    llm: dict[tuple[str, str], int] = {}
    for p, j in zip(pairs, judged, strict=True):
        if not j or rng.random() < 0.3:
            llm[p] = truth[p] if rng.random() < 0.7 else int(rng.integers(0, 4))
    paths = {"human": tmp_path / "human.qrels", "llm": tmp_path / "llm.qrels"}
    for name, grades in (("human", human), ("llm", llm)):
        paths[name].write_text("".join(f"{q} 0 {d} {g}\n" for (q, d), g in grades.items()))
    merged = {**{p: g for p, g in llm.items() if p not in human}, **human}
    paths["merged"] = tmp_path / "merged.qrels"
    paths["merged"].write_text("".join(f"{q} 0 {d} {g}\n" for (q, d), g in merged.items()))
    runs = []
    for r in range(2):
        path = tmp_path / f"run{r}.txt"
        lines = []
        for q in range(8):
            docs = rng.permutation(20)[:15]
            for rank, d in enumerate(docs, start=1):
                score = truth[f"q{q}", f"d{q}-{d}"] * r + rng.random()
                lines.append(f"q{q} Q0 d{q}-{d} {rank} {score:.6f} r{r}\n")
        path.write_text("".join(lines))
        runs.append(path)
    return {"paths": paths, "runs": runs, "human": human, "llm": llm, "merged": merged}
