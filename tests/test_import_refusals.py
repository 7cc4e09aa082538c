"""`relgrade batch import` refuses what is not its export's answer: results of another store's
export or a key the export never asked stop the import naming the line; a line answered by
another model fails, never a grade; empty results files are said, and all empty is an error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.store.store import Store
from tests import fake_engine
from tests.fakeserver import FakeServer
from tests.grade_data import GradeFiles, write_grade_files
from tests.helpers.batch_cli import cli_export, custom_ids, http_engine, with_a_copied_doc
from tests.helpers.judgments import stored_judgments


@pytest.fixture
def files(tmp_path: Path) -> GradeFiles:
    return with_a_copied_doc(write_grade_files(tmp_path, n_queries=4, depth=5))


def test_results_of_another_export_are_refused(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    requests = cli_export(files, tmp_path / "a.db", tmp_path / "out-a")
    results = http_engine(fake_server, requests, tmp_path / "res")
    cli_export(files, tmp_path / "b.db", tmp_path / "out-b")
    capsys.readouterr()
    assert main(["batch", "import", "--store", str(tmp_path / "b.db"), *map(str, results)]) == 2
    err = capsys.readouterr().err
    assert "which this store did not make" in err and f"{results[0]}:1:" in err
    with Store(tmp_path / "b.db") as store:
        assert store.count() == 0

    # A line whose key the export never asked (another prompt or model): refused, named.
    lines = results[0].read_text().splitlines()
    record = json.loads(lines[1])
    export_id = record["custom_id"].split(":")[1]
    record["custom_id"] = f"relgrade:{export_id}:sha256:{'0' * 64}"
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join([lines[0], json.dumps(record), *lines[2:]]) + "\n")
    assert main(["batch", "import", "--store", str(tmp_path / "a.db"), str(edited)]) == 2
    assert "never asked for" in capsys.readouterr().err
    with Store(tmp_path / "a.db") as store:
        assert store.count() == 0  # the chunk holding the bad line stored nothing


def test_lines_answered_by_another_model_fail_and_are_never_grades(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "m.db"
    requests = cli_export(files, db, tmp_path / "out")
    answer = fake_engine.http_answer(fake_server.base_url)
    other = set(custom_ids(requests[0])[:3])
    results = []
    (tmp_path / "res").mkdir()
    for path in requests:
        target = tmp_path / "res" / f"{path.stem}.results.jsonl"
        fake_engine.run_batch(path, target, answer)
        lines = [json.loads(x) for x in target.read_text().splitlines()]
        for line in lines:
            if line["custom_id"] in other:
                line["response"]["body"]["model"] = "other-model"
            elif line["response"]["body"]:
                line["response"]["body"]["model"] = "fake-model-2024-07-18"  # a dated snapshot
        target.write_text("".join(json.dumps(x) + "\n" for x in lines))
        results.append(target)
    capsys.readouterr()
    assert main(["batch", "import", "--store", str(db), *map(str, results), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "3 failed (ModelMismatch 3)" in err
    with Store(db) as store:
        failed = {j.key: j for j in stored_judgments(store, status="failed")}
        ok = store.count(status="ok")
    assert len(failed) == 3 and ok == 17
    assert all(j.grade is None and j.error is not None for j in failed.values())
    assert all("answered by model 'other-model'" in j.error.message for j in failed.values())  # type: ignore[union-attr]


def test_an_empty_results_file_is_said_and_all_empty_is_an_error(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "e.db"
    requests = cli_export(files, db, tmp_path / "out")
    empty = tmp_path / "empty.results.jsonl"
    empty.write_text("")
    capsys.readouterr()
    assert main(["batch", "import", "--store", str(db), str(empty)]) == 2
    err = capsys.readouterr().err
    assert "no results lines: the file is empty; nothing was imported" in err
    assert str(empty) in err and "vllm run-batch" in err
    results = http_engine(fake_server, requests, tmp_path / "res")
    assert main(["batch", "import", "--store", str(db), str(empty), *map(str, results)]) == 0
    err = capsys.readouterr().err
    assert f"{empty}: no results lines (empty)" in err
    with Store(db) as store:
        assert store.count(status="ok") == 20
