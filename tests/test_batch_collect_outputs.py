"""`batch collect` writes --out/--qrels-out and prints the diff as the `regrade --batch
--no-wait` that submitted the jobs would; a rerun of that regrade afterwards (live or --batch)
counts the pairs the batch graded as graded by batch, never 0."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.io.judgments import read_judgments
from tests.batch_helpers import new_prompt, seed_store
from tests.fake_batch import BatchPlan, FakeBatchAPI
from tests.fakeserver import FakeServer
from tests.helpers.batch_api import fresh_batch_api, prices_file


@pytest.fixture
def api(
    batch_server: tuple[FakeServer, FakeBatchAPI], monkeypatch: pytest.MonkeyPatch
) -> FakeBatchAPI:
    return fresh_batch_api(batch_server, monkeypatch)


def _submitted(api: FakeBatchAPI, tmp_path: Path, *select: str) -> list[str]:
    """A store of 8 old judgments and a `regrade --batch --no-wait` of `select`; its flags."""
    db = tmp_path / "s.db"
    seed_store(db, 8)  # old grades 0,1,2,3,0,1,2,3
    regrade = [
        "regrade", "--store", str(db), "--prompt", new_prompt(tmp_path).source,
        "--model", "fake-model", "--base-url", api.server.base_url, "--poll-interval", "0",
        "--quiet", "--prices", prices_file(tmp_path), *(("--select", *select) if select else ()),
    ]  # fmt: skip
    api.plan(BatchPlan(polls_in_progress=1))
    assert main([*regrade, "--batch", "--no-wait"]) == 0
    return regrade


def _collect(regrade: list[str], *extra: str) -> list[str]:
    store, url, prices = (
        regrade[regrade.index(f) + 1] for f in ("--store", "--base-url", "--prices")
    )
    return ["batch", "collect", "--store", store, "--base-url", url, "--poll-interval", "0",
            "--prices", prices, "--quiet", *extra]  # fmt: skip


@pytest.mark.slow
def test_collect_writes_what_the_regrade_would(
    api: FakeBatchAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    regrade = _submitted(api, tmp_path, "grade<=1")  # d0, d1, d4, d5
    capsys.readouterr()
    out, qrels = tmp_path / "collected.jsonl", tmp_path / "collected.qrels"
    code = main(_collect(regrade, "--out", str(out), "--qrels-out", str(qrels), "--format", "json"))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    collected = json.loads(captured.out)
    assert collected["n"] == 4 and collected["pending"] == 0 and collected["batch_graded"] == 4
    assert collected["cost_without_batch"] == pytest.approx(2 * collected["cost"])
    assert sorted(j.doc_id for j in read_judgments(out)) == ["d0", "d1", "d4", "d5"]
    assert len(qrels.read_text().splitlines()) == 4

    again, again_qrels = tmp_path / "again.jsonl", tmp_path / "again.qrels"
    asked = api.server.counts["requests"]
    code = main(
        [*regrade, "--format", "json", "--out", str(again), "--qrels-out", str(again_qrels)]
    )
    rerun = json.loads(capsys.readouterr().out)
    assert code == 0 and api.server.counts["requests"] == asked  # nothing sent again
    assert rerun["sent"] == 0 and rerun["batch_graded"] == 4  # not 0: the batch graded them
    for key in ("n", "changed", "transition", "kappa_between_versions", "cost", "failed"):
        assert rerun[key] == collected[key]
    skip = {"created_at", "latency_ms"}
    assert [j.model_dump(exclude=skip) for j in read_judgments(again)] == [
        j.model_dump(exclude=skip) for j in read_judgments(out)
    ]
    assert again_qrels.read_text() == qrels.read_text()


@pytest.mark.slow
def test_a_live_rerun_after_collect_says_graded_by_batch(
    api: FakeBatchAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    regrade = _submitted(api, tmp_path)
    assert main(_collect(regrade)) == 0
    table = capsys.readouterr().out
    assert "pairs 8, compared 8" in table and "8 graded by batch" in table
    assert main(regrade) == 0  # the same command, live: nothing left to send
    assert "8 graded by batch" in capsys.readouterr().out
    assert api.server.counts["requests"] == 0


@pytest.mark.slow
def test_jobs_stored_without_their_selection_give_the_pairs_they_hold(
    api: FakeBatchAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    regrade = _submitted(api, tmp_path, "grade<=1")
    with sqlite3.connect(tmp_path / "s.db") as conn:  # a job of an earlier relgrade
        conn.execute("UPDATE batch_jobs SET judge_config = json_remove(judge_config, '$.select')")
    capsys.readouterr()
    assert main(_collect(regrade, "--format", "json")) == 0
    collected = json.loads(capsys.readouterr().out)
    assert collected["n"] == 4 and collected["batch_graded"] == 4 and collected["pending"] == 0
