"""ir_datasets: a real dataset over local files (tests/helpers/irds_local.py) as `queries=`,
`docs=` and qrels of the Python API, and as `--dataset ID` of `relgrade grade` and `relgrade
evaluate`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import relgrade as rg
from grader.cli.main import main
from grader.errors import InputError
from grader.io.judgments import read_judgments
from tests.fakeserver import FakeServer
from tests.grade_data import GradeFiles, write_grade_files
from tests.helpers.irds_local import local_dataset

pytest.importorskip("ir_datasets")


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> GradeFiles:
    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "irds"))
    return write_grade_files(tmp_path)


@pytest.fixture
def dataset(files: GradeFiles, tmp_path: Path) -> tuple[str, Any]:
    docs_tsv = tmp_path / "docs.tsv"
    with docs_tsv.open("w") as out:
        for line in files.docs.read_text().splitlines():
            doc = json.loads(line)
            out.write(f"{doc['doc_id']}\t{doc['text']}\n")
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("".join(f"q{i // 4} 0 d{i} {i % 4}\n" for i in range(12)))
    return local_dataset(tmp_path, files.queries, docs_tsv, qrels)


def _grades(frame: Any) -> dict[tuple[str, str], int]:
    return dict(zip(zip(frame.query_id, frame.doc_id, strict=True), frame.grade, strict=True))


def test_grade_takes_a_dataset_for_queries_and_docs(
    files: GradeFiles, dataset: tuple[str, Any], tmp_path: Path
) -> None:
    _, ds = dataset
    from_dataset = rg.grade(
        runs=files.run,
        queries=ds,
        docs=ds,
        judge="lexical",
        store=tmp_path / "a.db",
        progress=False,
    )
    from_files = rg.grade(
        runs=files.run,
        queries=files.queries,
        docs=files.docs,
        judge="lexical",
        store=tmp_path / "b.db",
        progress=False,
    )
    assert len(from_dataset) == files.n_pairs
    assert _grades(from_dataset) == _grades(from_files)


@pytest.mark.usefixtures("files")
def test_llm_grading_reads_only_the_needed_docs_from_the_docstore(
    files: GradeFiles,
    dataset: tuple[str, Any],
    tmp_path: Path,
    fake_server: FakeServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-irds")
    _, ds = dataset
    frame = rg.grade(
        runs=files.run,
        queries=ds,
        docs=ds,
        base_url=fake_server.base_url,
        depth=2,
        store=tmp_path / "s.db",
        progress=False,
    )
    assert len(frame) == 6 and (frame.status == "ok").all()
    assert fake_server.counts["requests"] == 6
    assert all("doc" in body["messages"][-1]["content"] for body in fake_server.requests)


def test_grade_dataset_flag_equals_the_files(
    files: GradeFiles, dataset: tuple[str, Any], tmp_path: Path
) -> None:
    dataset_id, _ = dataset
    one, two = tmp_path / "1.jsonl", tmp_path / "2.jsonl"
    common = ["--judge", "lexical", "--quiet", "--run", str(files.run)]
    assert (
        main(
            [
                "grade",
                "--dataset",
                dataset_id,
                *common,
                "--store",
                str(tmp_path / "a.db"),
                "--out",
                str(one),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "grade",
                "--queries",
                str(files.queries),
                "--docs",
                str(files.docs),
                *common,
                "--store",
                str(tmp_path / "b.db"),
                "--out",
                str(two),
            ]
        )
        == 0
    )
    grades = {(j.query_id, j.doc_id): j.grade for j in read_judgments(one)}
    assert grades == {(j.query_id, j.doc_id): j.grade for j in read_judgments(two)}
    assert len(grades) == files.n_pairs


def test_evaluate_dataset_flag_and_api_take_its_qrels(
    files: GradeFiles,
    dataset: tuple[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    dataset_id, ds = dataset
    qrels = tmp_path / "qrels.txt"
    capsys.readouterr()
    assert main(["evaluate", "--dataset", dataset_id, str(files.run), "--format", "json"]) == 0
    from_flag = json.loads(capsys.readouterr().out)
    assert main(["evaluate", str(qrels), str(files.run), "--format", "json"]) == 0
    from_file = json.loads(capsys.readouterr().out)
    assert from_flag == from_file and len(from_file) == 6
    frame = rg.evaluate(ds, files.run)
    assert frame.to_dict("records") == from_file


def test_unknown_dataset_id_is_an_input_error(files: GradeFiles, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="ir_datasets knows no dataset by that id"):
        from grader.io.datasets import load_dataset

        load_dataset("relgrade-test/no-such-thing")
    code = main(["evaluate", "--dataset", "relgrade-test/no-such-thing", str(files.run)])
    assert code == 2
