"""Ids are text in the Python API, as in files: `1`, `1.0`, `007` and `7` are four ids, read as
written from paths and from frames read as text; a frame whose ids pandas read as numbers with a
decimal point (1.0 for "1", 7.0 for "007") or left empty is an InputError saying how to read
them as text, never ids silently renamed."""

from __future__ import annotations

import io
import json
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import relgrade as rg
from grader.cli.main import main
from grader.errors import InputError

# Queries 1, 1.0 and 007; docs 1, 1.0, 007, 7 and 08: every id a number to a careless reader.
QUERIES = {"1": "sort a list", "1.0": "sort lists fast", "007": "bond list sort"}
DOCS = {
    "1": "sort a list in python",
    "1.0": "sorting lists fast",
    "007": "bond list sort james",
    "7": "seven unrelated words",
    "08": "list sort bond",
}
RUN = [("1", "1", 3), ("1", "1.0", 2), ("1", "007", 1), ("1.0", "7", 3), ("1.0", "08", 2)]
RUN += [("007", "007", 5), ("007", "1", 4)]
QRELS = [("1", "1", 2), ("1", "007", 0), ("1.0", "7", 1), ("007", "007", 3), ("007", "08", 1)]
PAIRS = {(q, d) for q, d, _ in RUN}
IDS_HINT = "dtype"


@pytest.fixture
def paths(tmp_path: Path) -> dict[str, Path]:
    found = {
        "queries": tmp_path / "q.tsv",
        "docs": tmp_path / "d.jsonl",
        "run": tmp_path / "r.run",
        "qrels": tmp_path / "h.qrels",
        "csv": tmp_path / "h.csv",
    }
    found["queries"].write_text("".join(f"{q}\t{t}\n" for q, t in QUERIES.items()))
    found["docs"].write_text(
        "".join(json.dumps({"doc_id": d, "text": t}) + "\n" for d, t in DOCS.items())
    )
    found["run"].write_text("".join(f"{q} Q0 {d} 0 {s} r\n" for q, d, s in RUN))
    found["qrels"].write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in QRELS))
    found["csv"].write_text(
        "query_id,doc_id,grade\n" + "".join(f"{q},{d},{g}\n" for q, d, g in QRELS)
    )
    return found


def _pairs(frame: pd.DataFrame) -> set[tuple[str, str]]:
    return set(zip(frame["query_id"], frame["doc_id"], strict=True))


def _as_text(path: Path, **kwargs: Any) -> pd.DataFrame:
    """A file read by pandas the way ids should be: as text."""
    frame: pd.DataFrame = pd.read_csv(path, dtype={"query_id": str, "doc_id": str}, **kwargs)
    return frame


def test_paths_keep_every_id_as_written(paths: dict[str, Path]) -> None:
    assert _pairs(rg.read_qrels(paths["qrels"])) == {(q, d) for q, d, _ in QRELS}
    assert _pairs(rg.read_qrels(paths["csv"])) == {(q, d) for q, d, _ in QRELS}
    assert _pairs(rg.read_run(paths["run"])) == PAIRS
    scores = rg.evaluate(paths["qrels"], paths["run"], ["P(rel=1)@2"], per_query=True)
    assert set(scores["query_id"]) == {"1", "1.0", "007", "all"}
    value = scores.set_index("query_id")["value"]
    # Each query's top 2: one relevant result, one unjudged ("1.0" is not "1", "08" not "8").
    assert value.to_dict() == {"007": 0.5, "1": 0.5, "1.0": 0.5, "all": 0.5}


def test_frames_read_as_text_equal_the_paths(paths: dict[str, Path]) -> None:
    by_path = rg.evaluate(paths["csv"], paths["run"], ["P(rel=1)@2"], per_query=True)
    names = ["query_id", "x", "doc_id", "rank", "score", "tag"]
    run = _as_text(paths["run"], sep=" ", header=None, names=names)
    by_frame = rg.evaluate(_as_text(paths["csv"]), {"r": run}, ["P(rel=1)@2"], per_query=True)
    pd.testing.assert_frame_equal(by_frame, by_path)


def test_grade_keeps_the_ids_of_paths_and_of_frames(paths: dict[str, Path], tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    options: dict[str, Any] = {"judge": "lexical", "store": store, "progress": False}
    by_path = rg.grade(runs=paths["run"], queries=paths["queries"], docs=paths["docs"], **options)
    assert _pairs(by_path) == PAIRS
    queries = pd.DataFrame({"qid": list(QUERIES), "query": list(QUERIES.values())})
    docs = pd.DataFrame({"docno": list(DOCS), "text": list(DOCS.values())})
    pairs = pd.DataFrame(RUN, columns=["qid", "docno", "score"])
    pairs = pairs.merge(queries, on="qid").merge(docs, on="docno")
    by_frame = rg.grade(pairs, **options)
    assert _pairs(by_frame) == PAIRS
    assert by_frame.set_index(["query_id", "doc_id"])["grade"].to_dict() == (
        by_path.set_index(["query_id", "doc_id"])["grade"].to_dict()
    )
    # The grade frame as fill= on people's qrels: the ids meet those of the files.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        filled = rg.evaluate(paths["qrels"], paths["run"], ["P(rel=1)@2"], fill=by_path)
    shares = filled[filled["source"].notna()].set_index("source")["value"]
    assert shares["unjudged"] == 0.0 and shares["human"] > 0


def test_sample_and_calibrate_keep_the_ids(paths: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "j.jsonl"
    args = ["grade", "--run", str(paths["run"]), "--queries", str(paths["queries"])]
    args += ["--docs", str(paths["docs"]), "--judge", "lexical", "--store", str(tmp_path / "s.db")]
    assert main([*args, "--quiet", "--out", str(out)]) == 0
    drawn = rg.sample(out, fraction=1.0, strategy="uniform", seed=0)
    assert _pairs(drawn.pairs) == PAIRS
    judgments = pd.read_json(out, lines=True, dtype={"query_id": str, "doc_id": str})
    assert _pairs(judgments) == PAIRS
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        by_path = rg.calibrate(out, paths["csv"], no_manifest=True, bootstrap=0)
        by_frame = rg.calibrate(judgments, _as_text(paths["csv"]), no_manifest=True, bootstrap=0)
    assert by_path.to_dict()["n"] == len(PAIRS & {(q, d) for q, d, _ in QRELS}) == 4
    assert by_frame.to_dict()["n"] == 4


def _numbers(text: str) -> pd.DataFrame:
    """What `pd.read_csv` makes of ids without dtype=str."""
    return pd.read_csv(io.StringIO(text))


@pytest.mark.parametrize(
    ("call", "what"),
    [
        (lambda f, p: rg.read_qrels(f), "qrels"),
        (lambda f, p: rg.evaluate(f, p["run"]), "qrels"),
        (lambda f, p: rg.evaluate(p["qrels"], f.rename(columns={"grade": "score"})), "run"),
        (lambda f, p: rg.evaluate(p["qrels"], p["run"], fill=f), "llm grades"),
        (lambda f, p: rg.evaluate(f, p["run"], fill=p["qrels"]), "human qrels"),
        (lambda f, p: rg.calibrate(f, p["csv"], no_manifest=True, bootstrap=0), "llm grades"),
        (lambda f, p: rg.sample(f, n=1), "judgments"),
        (lambda f, p: rg.sample(f.assign(status="ok"), n=1), "judgments"),
    ],
)
def test_ids_read_as_decimal_numbers_are_an_error(
    paths: dict[str, Path], call: Any, what: str
) -> None:
    frame = _numbers("query_id,doc_id,grade\n1,007,1\n2.0,7,0\n")  # query ids 1.0, 2.0
    assert str(frame["query_id"].dtype) == "float64"
    with pytest.raises(InputError, match=r"query_id.*1\.0") as raised:
        call(frame, paths)
    assert IDS_HINT in (raised.value.hint or "") and what in str(raised.value)


def test_an_empty_id_is_an_error_not_the_id_nan(paths: dict[str, Path]) -> None:
    frame = pd.DataFrame({"query_id": ["1", "1.0"], "doc_id": ["007", None], "grade": [1, 0]})
    with pytest.raises(InputError, match=r"doc_id.*empty"):
        rg.read_qrels(frame)
    with pytest.raises(InputError, match=r"doc_id.*empty"):
        rg.evaluate(paths["qrels"], frame.rename(columns={"grade": "score"}))


def test_grade_inputs_with_decimal_ids_are_an_error(paths: dict[str, Path], tmp_path: Path) -> None:
    options: dict[str, Any] = {"judge": "lexical", "store": tmp_path / "s.db", "progress": False}
    pairs = pd.DataFrame({"qid": [1.0], "docno": ["007"], "query": ["q"], "text": ["t"]})
    with pytest.raises(InputError, match=r"qid.*1\.0"):
        rg.grade(pairs, **options)
    queries = pd.DataFrame({"query_id": [1.0, 7.0], "text": ["a", "b"]})
    with pytest.raises(InputError, match=r"query_id.*1\.0"):
        rg.grade(runs=paths["run"], queries=queries, docs=paths["docs"], **options)
    docs = pd.DataFrame({"doc_id": [7.0], "text": ["a"]})
    with pytest.raises(InputError, match=r"doc_id.*7\.0"):
        rg.grade(runs=paths["run"], queries=paths["queries"], docs=docs, **options)


def test_integer_ids_are_their_digits(paths: dict[str, Path]) -> None:
    # Integers lose nothing but leading zeros: 1 is the id "1" (007 would be 7: read as text).
    frame = _numbers("query_id,doc_id,grade\n1,1,2\n1,7,0\n")
    assert _pairs(rg.read_qrels(frame)) == {("1", "1"), ("1", "7")}
    scores = rg.evaluate(frame, paths["run"], ["P(rel=1)@1"], per_query=True)
    assert scores.set_index("query_id")["value"]["1"] == 1.0
