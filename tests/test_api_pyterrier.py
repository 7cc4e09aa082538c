"""PyTerrier: a result frame goes into `relgrade.evaluate` and `relgrade.grade` as it is (see
test_api_evaluate and test_api_grade), and `relgrade.pyterrier.Grader` is a transformer that
adds the grades as `label`, without starting Java."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import relgrade as rg
from grader.cli.main import main
from grader.io.judgments import read_judgments
from tests.grade_data import GradeFiles, write_grade_files

pt = pytest.importorskip("pyterrier")


@pytest.fixture
def files(tmp_path: Path) -> GradeFiles:
    return write_grade_files(tmp_path)


def _results(files: GradeFiles) -> pd.DataFrame:
    run = rg.read_run(files.run)
    queries = dict(line.split("\t") for line in files.queries.read_text().splitlines())
    return pd.DataFrame(
        {
            "qid": run.query_id,
            "query": run.query_id.map(queries),
            "docno": run.doc_id,
            "score": run.score,
            "rank": run["rank"] - 1,
        }
    )


def test_grader_adds_the_commands_grades_as_label(files: GradeFiles, tmp_path: Path) -> None:
    results = _results(files)
    grader = rg.pyterrier.Grader(
        docs=files.docs, judge="lexical", store=tmp_path / "a.db", progress=False
    )
    labelled = (pt.apply.generic(lambda frame: frame) >> grader)(results)
    assert list(labelled.columns) == [*results.columns, "label"]
    assert str(labelled.label.dtype) == "Int64" and labelled.label.notna().all()
    out = tmp_path / "j.jsonl"
    args = files.args("--judge", "lexical", "--store", tmp_path / "b.db", "--out", out, "--quiet")
    assert main(args) == 0
    command = {(j.query_id, j.doc_id): j.grade for j in read_judgments(out)}
    got = zip(labelled.qid, labelled.docno, labelled.label, strict=True)
    assert {(q, d): int(g) for q, d, g in got} == command
    assert not pt.java.started()  # no Java (and no download of Terrier's jars) for this


def test_labelled_results_evaluate_as_qrels(files: GradeFiles, tmp_path: Path) -> None:
    results = _results(files)
    grader = rg.pyterrier.Grader(
        docs=files.docs, judge="lexical", store=tmp_path / "a.db", progress=False
    )
    labelled = grader(results)
    assert isinstance(labelled, pd.DataFrame)
    scores = rg.evaluate(labelled[["qid", "docno", "label"]], results, ["Judged@4"])
    assert scores.value.tolist() == [1.0]


def test_integer_ids_label_their_rows(tmp_path: Path) -> None:
    # A result frame with integer ids (as pandas reads 1 and 7): each row gets its own grade.
    # (One docno, one text: a docno given two texts is an InputError, test_api_frame_checks.)
    results = pd.DataFrame(
        {"qid": [1, 1, 2], "query": ["sort a list", "sort a list", "retry backoff"],
         "docno": [7, 8, 9], "text": ["sort a list fast", "cats", "retry with backoff"],
         "score": [2.0, 1.0, 1.0], "rank": [0, 1, 0]}
    )  # fmt: skip
    grader = rg.pyterrier.Grader(judge="lexical", store=tmp_path / "a.db", progress=False)
    labelled = grader(results)
    assert isinstance(labelled, pd.DataFrame) and labelled.label.notna().all()
    graded = rg.grade(results.astype({"qid": str, "docno": str}), judge="lexical",
                      store=tmp_path / "a.db", progress=False)  # fmt: skip
    assert labelled.label.tolist() == graded.grade.tolist()
