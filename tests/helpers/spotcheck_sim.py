"""Shared pieces of the spot-check simulations: the TREC DL 2019 label sets, a synthetic
population and sample paths.

`DL2019` is found by walking up from this file to a folder holding `shared/data/trec-dl-2019`
(the repository may sit at /work/main or in a worktree below /work/wt); None when absent, and
the tests that need it skip.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from grader.io.trec import read_qrels

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

DL2019: Path | None = next(
    (
        p / "shared" / "data" / "trec-dl-2019"
        for p in Path(__file__).resolve().parents
        if (p / "shared" / "data" / "trec-dl-2019").is_dir()
    ),
    None,
)
LABEL_SETS = (
    "dl2019_sun_then_decomposed_relavance_qrel",
    "dl2019_test_4prompts_flant5large",
    "dl2019_test_4prompts_llama70b",
    "dl2019_test_baseline_relavance_qrel_prompt_order_3210",
    "dl2019_test_sun_then_decomposed_flant5large",
)


@dataclass(frozen=True)
class LabelSets:
    """The 9,260 NIST-graded pairs: query of each, human grade, and each label set's grade."""

    query: IntArray
    human: IntArray
    llm: dict[str, IntArray]
    query_ids: list[str]
    doc_ids: list[str]

    def votes(self, threshold: int = 2) -> FloatArray:
        """The share of the label sets that call each pair relevant (grade >= threshold)."""
        return np.asarray(
            np.mean([g >= threshold for g in self.llm.values()], axis=0), dtype=np.float64
        )


def load_label_sets() -> LabelSets:
    """The human qrels and the five shared LLM label sets, aligned pair by pair."""
    assert DL2019 is not None
    human = read_qrels(DL2019 / "2019qrels-pass.txt")
    keys = human[["query_id", "doc_id"]]
    llm = {}
    for name in LABEL_SETS:
        frame = read_qrels(DL2019 / "llm-labels" / f"{name}.txt")
        merged = keys.merge(frame, on=["query_id", "doc_id"], how="left")
        assert not merged["grade"].isna().any(), name
        llm[name] = merged["grade"].to_numpy(dtype=np.int64)
    codes = np.asarray(keys["query_id"].astype("category").cat.codes, dtype=np.int64)
    return LabelSets(
        query=codes,
        human=human["grade"].to_numpy(dtype=np.int64),
        llm=llm,
        query_ids=keys["query_id"].astype(str).tolist(),
        doc_ids=keys["doc_id"].astype(str).tolist(),
    )


def synthetic_population(seed: int = 5) -> tuple[IntArray, FloatArray, FloatArray, IntArray]:
    """A fixed population of LLM-graded pairs in 60 queries that differ in size, in their share
    of relevant pairs and in how lenient the LLM is on them: (query of each pair, human relevant
    0/1, LLM relevant 0/1, LLM grade 0..3)."""
    rng = np.random.default_rng(seed)
    n_queries = 60
    sizes = rng.integers(40, 250, n_queries)
    q = np.repeat(np.arange(n_queries), sizes)
    share = rng.beta(1.0, 2.5, n_queries)[q]
    y = (rng.random(q.size) < share).astype(np.float64)
    lenient = rng.uniform(0.1, 0.5, n_queries)[q]
    f = np.where(y == 1, rng.random(q.size) < 0.85, rng.random(q.size) < lenient)
    grade = np.where(f, 2 + (rng.random(q.size) < 0.4), rng.random(q.size) < 0.5)
    return q.astype(np.int64), y, f.astype(np.float64), grade.astype(np.int64)


def successive_paths(
    w: FloatArray, n: int, paths: int, rng: np.random.Generator
) -> tuple[IntArray, FloatArray]:
    """`paths` successive-sampling orders of n pairs (as `relgrade sample --strategy active`
    draws one), vectorised: the pairs of each path and each one's draw probability."""
    keys = rng.exponential(size=(paths, w.size)) / w
    first = np.argpartition(keys, n - 1, axis=1)[:, :n]
    order = np.take_along_axis(
        first, np.argsort(np.take_along_axis(keys, first, axis=1), axis=1), axis=1
    )
    drawn = w[order]
    left = w.sum() - np.concatenate([np.zeros((paths, 1)), np.cumsum(drawn, axis=1)[:, :-1]], 1)
    return order.astype(np.int64), drawn / left


def logprob_judge(human: IntArray, rng: np.random.Generator, sharpness: float = 0.3) -> FloatArray:
    """A synthetic judge's P(relevant) per pair, calibrated by construction against `human`
    (relevant at >= 2): r ~ Beta(a, b) with a / (a + b) the human share, the human label a draw
    from Bernoulli(r), so r given the label is Beta(a + 1, b) or Beta(a, b + 1)."""
    y = human >= 2
    a = sharpness
    b = a * (1 - y.mean()) / y.mean()
    return np.where(y, rng.beta(a + 1, b, y.size), rng.beta(a, b + 1, y.size))


def distribution_of(r: float) -> list[float]:
    """A grade distribution with P(grade >= 2) = r, split evenly inside each side."""
    return [(1 - r) / 2, (1 - r) / 2, r / 2, r / 2]
