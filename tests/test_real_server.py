"""relgrade against a real model server (issue 24, point 5): llama.cpp's OpenAI-compatible server
(llama-cpp-python) running SmolLM2-135M-Instruct, started by `.ci/run`'s real-server stage,
which names it in RELGRADE_REAL_SERVER_URL. Without that variable every test here skips; they
run only with `pytest -m real_server`. The model is tiny and its grades are poor: these check the
plumbing (every pair ok or failed with a cause, no request on a rerun, logprobs read or left out
with the reason, batch replies equal to live ones), not the grades."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from grader.cli.main import main
from grader.io.judgments import read_judgments
from grader.judges.failures import failure_cause
from grader.models import Judgment
from grader.prompts import shipped_prompt_files
from tests.helpers.real_server import (
    EXAMPLES,
    TIMEOUT,
    Server,
    answer_batch,
    calls_logged,
    grade_args,
    keys_called_after,
    keys_without_grade,
    real_server,
)

SERVER = real_server()
pytestmark = [
    pytest.mark.real_server,
    pytest.mark.skipif(SERVER is None, reason="no real server (RELGRADE_REAL_SERVER_URL unset)"),
]


class Graded:
    """One `grade` run of the examples through the server, shared by the tests of this module."""

    def __init__(self, server: Server, folder: Path) -> None:
        self.server = server
        self.folder = folder
        self.db = folder / "store.db"
        self.out = folder / "judgments.jsonl"
        self.args = grade_args(server, folder, "--store", str(self.db), "--out", str(self.out))
        self.code = main(self.args)
        self.judgments: list[Judgment] = list(read_judgments(self.out))

    def ok(self) -> list[Judgment]:
        return [j for j in self.judgments if j.status == "ok"]


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Graded:
    assert SERVER is not None
    return Graded(SERVER, tmp_path_factory.mktemp("real-server"))


def test_grade_a_dozen_pairs_each_ok_or_failed_with_a_cause(graded: Graded) -> None:
    assert graded.code in (0, 1)
    assert len(graded.judgments) == 12
    for judgment in graded.judgments:
        if judgment.status == "failed":
            assert failure_cause(judgment.error) not in ("no error recorded", "")
    # The server takes llama.cpp's json_object + schema: the grammar holds the reply to it.
    assert len(graded.ok()) >= 9
    assert {j.output_mode for j in graded.ok()} == {"json_object_schema"}


def test_an_unchanged_rerun_sends_no_request(graded: Graded) -> None:
    """A rerun asks again only for the pairs that failed (the tiny model may fail one); every
    pair graded ok comes from the store, with the same grade."""
    failed = keys_without_grade(graded.db)
    before = calls_logged(graded.db)
    rerun_out = graded.folder / "rerun.jsonl"
    args = [*graded.args[: graded.args.index("--out")], "--out", str(rerun_out)]
    code = main(args)
    assert code in (0, 1) and (code == 0 or failed)
    assert keys_called_after(graded.db, before) <= failed
    rerun = {(j.query_id, j.doc_id): j.grade for j in read_judgments(rerun_out)}
    assert {(j.query_id, j.doc_id): rerun[(j.query_id, j.doc_id)] for j in graded.ok()} == {
        (j.query_id, j.doc_id): j.grade for j in graded.ok()
    }


def test_logprobs_give_a_distribution_summing_to_one_or_say_why_not(graded: Graded) -> None:
    for judgment in graded.ok():
        if judgment.distribution is not None:
            assert math.isclose(sum(judgment.distribution), 1.0, abs_tol=1e-9)
            assert judgment.expected_grade is not None
        else:
            assert judgment.notes and any("logprobs" in n for n in judgment.notes)


def test_regrade_to_another_prompt_version(
    graded: Graded, capsys: pytest.CaptureFixture[str]
) -> None:
    source = next(p for p in shipped_prompt_files() if p.stem == "passage-v1")
    v2 = graded.folder / "passage-v2.toml"
    text = source.read_text(encoding="utf-8").replace('version = "1"', 'version = "2"')
    v2.write_text(text + "\n[sampling.extra]\nrepeat_penalty = 1.0\n", encoding="utf-8")
    capsys.readouterr()
    code = main(
        [
            "regrade",
            "--store",
            str(graded.db),
            "--prompt",
            str(v2),
            "--base-url",
            graded.server.url,
            "--model",
            graded.server.model,
            "--concurrency",
            "2",
            "--timeout",
            TIMEOUT,
            "--format",
            "json",
            "--quiet",
        ]
    )
    diff = json.loads(capsys.readouterr().out)
    assert code in (0, 1)
    counted = diff["compared"] + diff["failed"] + diff["pending"] + diff["no_old_grade"]
    assert diff["n"] == 12 and counted == diff["n"] and diff["pending"] == 0
    assert sum(map(sum, diff["transition"])) == diff["compared"]


def test_batch_export_answer_import_gives_the_live_grades(
    graded: Graded, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, requests = tmp_path / "batch.db", tmp_path / "requests"
    export = [
        "batch",
        "export",
        "--store",
        str(db),
        "--queries",
        str(EXAMPLES / "queries.tsv"),
        "--docs",
        str(EXAMPLES / "docs.tsv"),
        "--run",
        str(EXAMPLES / "run.txt"),
        "--depth",
        "3",
        "--prompt",
        "passage",
        "--model",
        graded.server.model,
        "--output-mode",
        "json_object_schema",
        "--out-dir",
        str(requests),
        "--quiet",
    ]
    assert main(export) == 0
    results = tmp_path / "results.jsonl"
    assert answer_batch(graded.server, requests, results) == 12
    assert main(["batch", "import", "--store", str(db), str(results), "--quiet"]) in (0, 1)
    failed = keys_without_grade(db)
    out = tmp_path / "from-batch.jsonl"
    cached = grade_args(graded.server, tmp_path, "--store", str(db), "--out", str(out))
    assert main(cached) in (0, 1)
    # every pair the import graded comes from the store: only a failed one is asked live
    assert keys_called_after(db, 0) <= failed
    live = {(j.query_id, j.doc_id): j.grade for j in graded.ok()}
    batch = {(j.query_id, j.doc_id): j.grade for j in read_judgments(out) if j.status == "ok"}
    both = live.keys() & batch.keys()
    assert len(both) >= 9
    assert {k: batch[k] for k in both} == {k: live[k] for k in both}  # temperature 0


def test_calibrate_against_the_examples_human_grades(
    graded: Graded, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    code = main(
        [
            "calibrate",
            "--llm",
            str(graded.out),
            "--human",
            str(EXAMPLES / "human.qrels"),
            "--format",
            "json",
        ]
    )
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    assert report["n"] == len(graded.ok())
    assert sum(map(sum, report["confusion"])) == report["n"]


def test_the_python_api_grades_inside_a_running_loop_as_the_command(graded: Graded) -> None:
    """`rg.grade` inside `asyncio.run` (a running loop, as in Jupyter) through the real server,
    on the same store: every pair the command graded comes back with the command's grade and
    no request is sent for it (only a pair still failed is asked again)."""
    import asyncio

    import relgrade as rg

    assert SERVER is not None
    failed = keys_without_grade(graded.db)
    before = calls_logged(graded.db)

    async def in_a_notebook() -> pd.DataFrame:
        return rg.grade(
            runs=str(EXAMPLES / "run.txt"),
            queries=str(EXAMPLES / "queries.tsv"),
            docs=str(EXAMPLES / "docs.tsv"),
            depth=3,
            model=SERVER.model,
            base_url=SERVER.url,
            store=graded.db,
            concurrency=2,
            progress=False,
            timeout=float(TIMEOUT),
        )

    frame = asyncio.run(in_a_notebook())
    rows = frame.to_dict("records")
    api = {(r["query_id"], r["doc_id"]): (r["status"], r["grade"]) for r in rows}
    command = {(j.query_id, j.doc_id): (j.status, j.grade) for j in graded.judgments}
    assert set(api) == set(command)
    for pair, (status, grade) in command.items():
        if status == "ok":
            assert api[pair] == ("ok", grade)
    assert keys_called_after(graded.db, before) <= failed
