"""TREC DL 2019 as a collection with holes: the shared data (human qrels, LLM label sets,
passages) with a seeded share of the human qrels removed, and runs built over the judged pool.

DL 2019's folder holds no system runs, so `dl2019_runs` builds six over each query's judged
pool (every judged passage, ranked): BM25 on the passage text, a noisy oracle (human grade
plus Gaussian noise), three runs ranked by other LLM label sets (grade plus a small noise),
and a random ordering. Used by tests/test_fill_dl2019.py and bench/fill_dl2019.py.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from grader.io.trec import read_qrels

# The shared folder beside the repository (or beside the folder of worktrees); DATA.is_dir() is
# False when it is absent.
DATA = next(
    (
        up / "shared" / "data" / "trec-dl-2019"
        for up in Path(__file__).resolve().parents
        if (up / "shared" / "data" / "trec-dl-2019").is_dir()
    ),
    Path(__file__).resolve().parents[3] / "shared" / "data" / "trec-dl-2019",
)
LABELS = DATA / "llm-labels"
LLM_SET = "dl2019_test_4prompts_llama70b"
RUN_SETS = {
    "flant5": "dl2019_test_4prompts_flant5large",
    "sun": "dl2019_sun_then_decomposed_relavance_qrel",
    "order3210": "dl2019_test_baseline_relavance_qrel_prompt_order_3210",
}


def human_qrels() -> pd.DataFrame:
    return read_qrels(DATA / "2019qrels-pass.txt")


def label_set(name: str = LLM_SET) -> pd.DataFrame:
    return read_qrels(LABELS / f"{name}.txt")


def queries() -> dict[str, str]:
    lines = (DATA / "msmarco-test2019-queries.tsv").read_text().splitlines()
    pairs = (line.split("\t", 1) for line in lines if line)
    return {qid: text for qid, text in pairs}


def passages() -> dict[str, str]:
    out: dict[str, str] = {}
    with (DATA / "dl2019_document.jsonl").open() as fh:
        for line in fh:
            record = json.loads(line)
            out[str(record["docid"])] = str(record["doc"])
    return out


def _tokens(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _bm25(qrels: pd.DataFrame, texts: dict[str, str], qtexts: dict[str, str]) -> np.ndarray:
    """BM25 (k1 0.9, b 0.4) of each qrels row's passage for its query, statistics over the
    passages."""
    docs = {d: _tokens(t) for d, t in texts.items()}
    df: Counter[str] = Counter()
    for toks in docs.values():
        df.update(set(toks))
    n = len(docs)
    avg = sum(len(t) for t in docs.values()) / n
    out = np.zeros(len(qrels))
    for i, (qid, did) in enumerate(zip(qrels["query_id"], qrels["doc_id"], strict=True)):
        toks = docs.get(did, [])
        tf = Counter(toks)
        for term in set(_tokens(qtexts.get(qid, ""))):
            if tf[term]:
                idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
                norm = tf[term] + 0.9 * (1 - 0.4 + 0.4 * len(toks) / avg)
                out[i] = out[i] + idf * tf[term] * 1.9 / norm
    return out


def dl2019_runs(seed: int = 2019) -> dict[str, pd.DataFrame]:
    """Six runs over the judged pool: [query_id, doc_id, score]."""
    rng = np.random.default_rng(seed)
    qrels = human_qrels()
    base = qrels[["query_id", "doc_id"]].reset_index(drop=True)
    scores = {
        "bm25": _bm25(base, passages(), queries()),
        "oracle_noisy": qrels["grade"].to_numpy() + rng.normal(0, 1.5, len(base)),
    }
    for name, label in RUN_SETS.items():
        grades = base.merge(label_set(label), on=["query_id", "doc_id"], how="left")["grade"]
        scores[name] = grades.fillna(0).to_numpy(dtype=float) + rng.uniform(0, 0.9, len(base))
    scores["random"] = rng.uniform(0, 1, len(base))
    return {name: base.assign(score=np.round(s, 6)) for name, s in scores.items()}


def write_run(path: Path, run: pd.DataFrame, tag: str) -> Path:
    ranked = run.sort_values(["query_id", "score", "doc_id"], ascending=[True, False, False])
    ranked = ranked.assign(rank=ranked.groupby("query_id").cumcount() + 1)
    path.write_text(
        "".join(
            f"{q} Q0 {d} {r} {s} {tag}\n"
            for q, d, r, s in ranked[["query_id", "doc_id", "rank", "score"]].itertuples(
                index=False
            )
        )
    )
    return path


@dataclass(frozen=True)
class Holed:
    """The human qrels with a share removed: what people kept, and the removed pairs."""

    kept: pd.DataFrame
    removed: pd.DataFrame


def drop_share(qrels: pd.DataFrame, share: float, seed: int) -> Holed:
    """Remove `share` of the judged pairs at random (seeded)."""
    rng = np.random.default_rng(seed)
    out = np.zeros(len(qrels), dtype=bool)
    out[rng.choice(len(qrels), size=round(share * len(qrels)), replace=False)] = True
    return Holed(kept=qrels[~out].reset_index(drop=True), removed=qrels[out].reset_index(drop=True))


def write_qrels(path: Path, qrels: pd.DataFrame) -> Path:
    path.write_text(
        "".join(f"{q} 0 {d} {g}\n" for q, d, g in qrels[["query_id", "doc_id", "grade"]].values)
    )
    return path
