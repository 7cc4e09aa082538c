"""`rg.grade` checks its frames as the command checks its files: a missing text or query, an
empty or non-scalar id, and one id given two texts are each an `rg.InputError` naming the row
and the column, before anything is graded or stored; never a pydantic ValidationError, never a
pair graded with one of two texts."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import relgrade as rg

PAIRS: dict[str, list[Any]] = {
    "query_id": ["q1", "q1", "q2"],
    "doc_id": ["d1", "d2", "d3"],
    "query": ["cache eviction", "cache eviction", "retry backoff"],
    "text": ["evict the lru cache entry", "parse json config", "retry with backoff"],
}


def _with(column: str, row: int, value: Any) -> pd.DataFrame:
    frame = pd.DataFrame(PAIRS)
    values = list(frame[column])
    values[row] = value
    return frame.assign(**{column: pd.Series(values, dtype=object)})


def _stored(db: Path) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM judgments").fetchone()[0])


@pytest.mark.parametrize(
    ("column", "row", "value", "said"),
    [
        ("text", 1, np.nan, "text column has no text (row 1)"),
        ("text", 2, None, "text column has no text (row 2)"),
        ("query", 0, None, "query column has no text (row 0)"),
        ("doc_id", 1, "", "doc_id column has an empty id (row 1)"),
        ("query_id", 2, "", "query_id column has an empty id (row 2)"),
        ("doc_id", 0, ("d", 1), "doc_id column holds a tuple (('d', 1), row 0)"),
        ("doc_id", 2, None, "doc_id column has an empty id (row 2)"),
        ("doc_id", 1, "d1", "gives doc_id 'd1' two different text values (rows 0 and 1)"),
        ("query_id", 2, "q1", "gives query_id 'q1' two different query values (rows 0 and 2)"),
    ],
)
def test_a_bad_pairs_frame_is_an_input_error_naming_row_and_column(
    tmp_path: Path, column: str, row: int, value: Any, said: str
) -> None:
    db = tmp_path / "s.db"
    with pytest.raises(rg.InputError) as raised:
        rg.grade(_with(column, row, value), judge="lexical", store=db, progress=False)
    assert said in str(raised.value)
    assert _stored(db) == 0


def test_a_pair_given_twice_with_its_one_text_is_graded_once(tmp_path: Path) -> None:
    frame = pd.concat([pd.DataFrame(PAIRS), pd.DataFrame(PAIRS).iloc[[0]]], ignore_index=True)
    graded = rg.grade(frame, judge="lexical", store=tmp_path / "s.db", progress=False)
    assert graded[["query_id", "doc_id"]].values.tolist() == [
        ["q1", "d1"],
        ["q1", "d2"],
        ["q2", "d3"],
    ]


def test_docs_and_queries_frames_are_checked_alike(tmp_path: Path) -> None:
    run = pd.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["d1", "d2"], "score": [2.0, 1.0]})
    queries = pd.DataFrame({"query_id": ["q1"], "text": ["cache eviction"]})
    docs = pd.DataFrame({"doc_id": ["d1", "d2"], "text": ["lru cache", "json"]})
    bad: list[tuple[dict[str, Any], str]] = [
        (
            {"docs": docs.assign(text=pd.Series(["lru", None], dtype=object))},
            "docs DataFrame's text column has no text",
        ),
        (
            {"docs": pd.DataFrame({"doc_id": ["d1", "d1", "d2"], "text": ["a", "b", "c"]})},
            "docs DataFrame gives doc_id 'd1' two different text values (rows 0 and 1)",
        ),
        ({"queries": queries.assign(text=[np.nan])}, "queries DataFrame's text column has no"),
        ({"docs": docs.assign(doc_id=["d1", ""])}, "docs DataFrame's doc_id column has an empty"),
    ]
    for given, said in bad:
        inputs = {"queries": queries, "docs": docs, **given}
        with pytest.raises(rg.InputError, match=said.replace("(", r"\(").replace(")", r"\)")):
            rg.grade(runs=run, **inputs, judge="lexical", store=tmp_path / "s.db", progress=False)
    good = rg.grade(
        runs=run, queries=queries, docs=docs, judge="lexical", store=tmp_path / "s.db",
        progress=False,
    )  # fmt: skip
    assert good["status"].tolist() == ["ok", "ok"]
