"""The shipped example set loads with the project's readers and is consistent with itself."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from grader.io.docs import read_docs, read_queries
from grader.io.grades import read_human_grades
from grader.io.trec import read_run
from grader.judges.lexical.config import load_lexical_config
from grader.judges.lexical.fit import fit_lexical_thresholds
from grader.judges.lexical.judge import lexical_scores
from grader.metrics.evaluate import evaluate, mean_scores
from grader.models import Doc, Query

CODE = Path(__file__).resolve().parents[1] / "examples" / "code-search"
RUNS = ("run.bm25.txt", "run.weak.txt")

CodeSet = tuple[dict[str, Query], dict[str, Doc], dict[str, pd.DataFrame], pd.DataFrame]
"""The code-search set: queries, docs, runs by file name, human grades."""


@pytest.fixture(scope="module")
def code_set() -> CodeSet:
    return (
        read_queries(CODE / "queries.tsv"),
        read_docs(CODE / "docs.jsonl"),
        {name: read_run(CODE / name) for name in RUNS},
        read_human_grades(CODE / "human.csv"),
    )


def test_docs_are_code_chunks_with_stable_ids(code_set: CodeSet) -> None:
    _, docs, _, _ = code_set
    assert 35 <= len(docs) <= 50
    for doc_id, doc in docs.items():
        path, symbol = doc.metadata["path"], doc.metadata["symbol"]
        assert doc_id == f"{path}::{symbol}"
        assert doc.metadata["language"] == "python"
        assert doc.text.strip()
        assert symbol.split(".")[-1] in doc.text  # the chunk defines or names its symbol


def test_runs_and_grades_name_only_known_queries_and_docs(code_set: CodeSet) -> None:
    queries, docs, runs, human = code_set
    assert len(queries) == 12
    for name, run in runs.items():
        assert set(run["query_id"]) == set(queries), name
        assert set(run["doc_id"]) <= set(docs), name
        assert run.groupby("query_id").size().max() == 10
    assert set(human["query_id"]) == set(queries)
    assert set(human["doc_id"]) <= set(docs)


def test_grades_cover_the_top_ten_of_both_runs(code_set: CodeSet) -> None:
    _, _, runs, human = code_set
    graded = set(zip(human["query_id"], human["doc_id"], strict=True))
    for run in runs.values():
        top = run[run["rank"] <= 10]
        assert set(zip(top["query_id"], top["doc_id"], strict=True)) <= graded
    assert set(human["grade"]) == {0, 1, 2, 3}
    best = human.groupby("query_id")["grade"].max()
    assert (best == 3).all()  # every query has an exact target


def test_file_rank_column_is_already_in_trec_eval_order() -> None:
    for name in RUNS:
        lines = (CODE / name).read_text().splitlines()
        file_ranks = {(c[0], c[2]): int(c[3]) for c in (line.split() for line in lines)}
        run = read_run(CODE / name)
        computed = dict(
            zip(zip(run["query_id"], run["doc_id"], strict=True), run["rank"], strict=True)
        )
        assert computed == file_ranks


def test_the_bm25_run_beats_the_weak_run(code_set: CodeSet) -> None:
    _, _, runs, human = code_set
    ndcg = {
        name: mean_scores(evaluate(human, run, ["nDCG@10"]))["value"].iloc[0]
        for name, run in runs.items()
    }
    assert ndcg["run.bm25.txt"] > ndcg["run.weak.txt"] + 0.1


def test_default_lexical_thresholds_are_a_fit_on_this_set(code_set: CodeSet) -> None:
    queries, docs, _, human = code_set
    pairs = list(zip(human["query_id"], human["doc_id"], strict=True))
    scores = lexical_scores(queries, docs, pairs)
    assert np.isfinite(scores).all()
    fitted = fit_lexical_thresholds(scores, human["grade"].to_numpy())
    assert load_lexical_config().thresholds == pytest.approx(fitted, abs=0.01)


PASSAGES = Path(__file__).resolve().parents[1] / "examples" / "passages"


def test_passage_set_loads_and_is_consistent() -> None:
    queries = read_queries(PASSAGES / "queries.tsv")
    docs = read_docs(PASSAGES / "docs.tsv")
    run = read_run(PASSAGES / "run.txt")
    human = read_human_grades(PASSAGES / "human.qrels")
    assert len(queries) == 4 and len(docs) == 20
    assert all(d.title and d.text for d in docs.values())  # the 3-column TSV: title and text
    assert set(run["query_id"]) == set(queries) == set(human["query_id"])
    assert set(run["doc_id"]) | set(human["doc_id"]) <= set(docs)
    judged = set(zip(human["query_id"], human["doc_id"], strict=True))
    assert set(zip(run["query_id"], run["doc_id"], strict=True)) <= judged
    assert (human.groupby("query_id")["grade"].max() == 3).all()
