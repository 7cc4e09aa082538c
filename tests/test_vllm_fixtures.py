"""Result lines made by vLLM's own classes (tests/fixtures/vllm_batch: `BatchRequestOutput`,
`ChatCompletionResponse`, `ErrorResponse` dumped by `model_dump_json` as `vllm run-batch` writes
them) are imported as vLLM means them: each answer's grade and raw non-ASCII reason stored, each
error with its status and reason, a permanent one never asked again by `--reask`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.judges.failures import failure_kind
from grader.store.store import Store
from tests.fakeserver import FakeServer
from tests.grade_data import GradeFiles, write_grade_files
from tests.helpers.batch_cli import cli_export

FIXTURE = Path(__file__).parent / "fixtures" / "vllm_batch" / "results.jsonl"
GRADES = {0: 3, 5: 2, 6: 1, 7: 0}


@pytest.fixture
def files(tmp_path: Path) -> GradeFiles:
    return write_grade_files(tmp_path, n_queries=2, depth=4)  # 8 pairs


def _results(requests: Path, out: Path) -> list[str]:
    """The fixture with the export's custom ids in place of `@N`; no other byte changed."""
    ids = [json.loads(line)["custom_id"] for line in requests.read_text().splitlines()]
    lines = FIXTURE.read_text(encoding="utf-8").splitlines(keepends=True)
    assert len(lines) == len(ids)
    written = [
        line.replace(f'"custom_id":"@{n}"', json.dumps({"custom_id": ids[n]})[1:-1], 1)
        for n, line in enumerate(lines)
    ]
    out.write_text("".join(written), encoding="utf-8")
    return ids


def test_lines_made_by_vllm_are_imported_as_vllm_means_them(
    files: GradeFiles,
    fake_server: FakeServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    db, results = tmp_path / "s.db", tmp_path / "results.jsonl"
    (requests,) = cli_export(files, db, tmp_path / "out")
    ids = _results(requests, results)
    assert not results.read_bytes().isascii()  # vLLM writes the reason's characters raw

    capsys.readouterr()
    assert main(["batch", "import", "--store", str(db), str(results), "--quiet"]) == 1
    assert "4 ok, 4 failed (Batch:http_400 2, Batch:http_404 1, Batch:http_500 1)" in (
        capsys.readouterr().err
    )
    key = {n: custom_id.split(":", 2)[2] for n, custom_id in enumerate(ids)}
    with Store(db) as store:
        stored = store.get_many(key.values())
    for n, grade in GRADES.items():
        judgment = stored[key[n]]
        assert (judgment.status, judgment.grade) == ("ok", grade)
        assert judgment.reason == "Très pertinent : le passage répond — 関連あり"
    errors = {n: stored[key[n]].error for n in (1, 2, 3, 4)}
    assert all(e is not None and stored[key[n]].grade is None for n, e in errors.items())
    said = {n: e for n, e in errors.items() if e is not None}
    assert said[1].type == "Batch:http_400" and "maximum context length is 8192" in said[1].message
    assert said[2].type == "Batch:http_404" and "`other-model` does not exist" in said[2].message
    assert said[3].message.endswith("HTTP 500 InternalServerError: Engine loop died")
    assert said[4].message.endswith("HTTP 400: Request must not be sent in stream mode")
    kinds = {n: failure_kind(e) for n, e in said.items()}
    assert kinds == {1: "permanent", 2: "permanent", 3: "transient", 4: "permanent"}

    fake_server.reset()
    url = ["--base-url", fake_server.base_url]
    assert main(["batch", "import", "--store", str(db), str(results), "--reask", *url]) == 1
    assert fake_server.counts["requests"] == 1  # the engine failure alone is asked again
