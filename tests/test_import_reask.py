"""`relgrade batch import --reask` asks live the requests that failed, but never one whose key the
store holds ok by now (answered live or through another export)."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from grader.batch.adapter import JobJudges
from grader.batch.files.import_files import Importer
from grader.batch.files.import_followup import ImportSummary
from grader.cli.main import main
from grader.judges.llm.judge import LLMJudge
from grader.prompts import PromptSpec
from grader.store.store import Store
from tests.fakeserver import FakeServer
from tests.grade_data import GradeFiles, write_grade_files
from tests.helpers.batch_cli import MODEL, cli_export, custom_ids, http_engine, with_a_copied_doc


@pytest.fixture
def files(tmp_path: Path) -> GradeFiles:
    return with_a_copied_doc(write_grade_files(tmp_path, n_queries=4, depth=5))


def test_reask_does_not_pay_again_for_a_key_answered_since(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = ["--base-url", fake_server.base_url]
    db = tmp_path / "r.db"
    requests = cli_export(files, db, tmp_path / "out")
    failing = custom_ids(requests[0])[:2]
    results = http_engine(fake_server, requests, tmp_path / "res", fail_ids=failing)
    assert main(["batch", "import", "--store", str(db), *map(str, results), "--quiet"]) == 1
    # The two failed pairs are graded live meanwhile (same prompt and model: same keys).
    assert main(files.args("--store", str(db), *url, *MODEL, "--quiet")) == 0
    fake_server.reset()
    reask = ["batch", "import", "--store", str(db), *map(str, results), "--reask", *url]
    assert main([*reask, "--quiet"]) == 0
    assert fake_server.counts["requests"] == 0
    with sqlite3.connect(db) as conn:
        outcomes = dict(conn.execute("SELECT outcome, COUNT(*) FROM export_lines GROUP BY 1"))
    conn.close()
    assert outcomes == {"ok": 20}


def test_reask_alone_leaves_out_keys_answered_since(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path
) -> None:
    """`reask_failed` without an import before it (which would mark those lines ok first):
    failed lines whose keys the store holds ok by now are set ok and not asked again."""
    url = ["--base-url", fake_server.base_url]
    db = tmp_path / "r.db"
    requests = cli_export(files, db, tmp_path / "out")
    failing = custom_ids(requests[0])[:2]
    results = http_engine(fake_server, requests, tmp_path / "res", fail_ids=failing)
    assert main(["batch", "import", "--store", str(db), *map(str, results), "--quiet"]) == 1
    assert main(files.args("--store", str(db), *url, *MODEL, "--quiet")) == 0  # graded live
    fake_server.reset()
    export_id = failing[0].split(":")[1]

    def make_judge(model: str, prompt: PromptSpec) -> LLMJudge:
        return LLMJudge(model=model, prompt=prompt, base_url=fake_server.base_url)

    with Store(db) as store, Importer(store, JobJudges(make_judge).for_job) as importer:
        importer.judge(export_id, results[0])
        summary = ImportSummary(touched={(export_id, 1)})
        asyncio.run(importer.reask_failed(summary))
        assert importer.unresolved(summary) == 0
    assert fake_server.counts["requests"] == 0
    assert summary.reasked_ok == summary.reasked_failed == 0
