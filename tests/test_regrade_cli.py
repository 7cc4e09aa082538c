"""`relgrade regrade` and `relgrade batch status|collect` end to end against the fake server:
the concurrent path (no --batch), the Batch API path across processes, selections, outputs."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from grader.cli.main import main
from grader.io.judgments import read_judgments
from grader.io.trec import read_qrels
from grader.store.store import Store
from tests.batch_helpers import new_prompt, seed_store
from tests.fake_batch import BatchPlan, FakeBatchAPI
from tests.fakeserver import FakeServer
from tests.helpers.batch_api import fresh_batch_api, prices_file
from tests.helpers.judgments import stored_judgments


@pytest.fixture
def api(
    batch_server: tuple[FakeServer, FakeBatchAPI], monkeypatch: pytest.MonkeyPatch
) -> FakeBatchAPI:
    return fresh_batch_api(batch_server, monkeypatch)


def _regrade(
    capsys: pytest.CaptureFixture[str], db: Path, prompt: Path, url: str, *extra: str
) -> tuple[int, dict[str, Any]]:
    code = main(
        [
            "regrade",
            "--store", str(db),
            "--prompt", str(prompt),
            "--model", "fake-model",
            "--base-url", url,
            "--format", "json",
            "--poll-interval", "0",
            "--quiet",
            "--prices", prices_file(db.parent),
            *extra,
        ]
    )  # fmt: skip
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_concurrent_regrade_keeps_old_and_rerun_sends_nothing(
    api: FakeBatchAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    seed_store(db, 6)
    prompt = Path(new_prompt(tmp_path).source)
    url = api.server.base_url
    out, qrels = tmp_path / "new.jsonl", tmp_path / "new.qrels"
    code, diff = _regrade(capsys, db, prompt, url, "--out", str(out), "--qrels-out", str(qrels))
    assert code == 0
    assert api.server.counts["requests"] == 6 and api.counts["upload"] == 0
    assert diff["n"] == 6 and diff["failed"] == 0 and diff["sent"] == 6
    assert sum(map(sum, diff["transition"])) == 6
    assert diff["cost_without_batch"] == diff["cost"] > 0
    for key in ("changed", "kappa_between_versions", "cost"):
        assert key in diff
    new = read_judgments(out)
    assert len(new) == 6 and all(j.prompt and j.prompt.version == "2" for j in new)
    assert len(read_qrels(qrels)) == 6
    with Store(db) as store:
        versions = {j.prompt.version for j in stored_judgments(store) if j.prompt}
        assert versions == {"1", "2"} and store.count() == 12
    code, again = _regrade(capsys, db, prompt, url)
    assert code == 0 and again["sent"] == 0 and api.server.counts["requests"] == 6
    assert again["transition"] == diff["transition"]


@pytest.mark.slow
def test_batch_no_wait_then_status_and_collect_in_later_processes(
    api: FakeBatchAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    seed_store(db, 6)
    prompt = Path(new_prompt(tmp_path).source)
    url = api.server.base_url
    api.plan(BatchPlan(polls_in_progress=2, errors={0: (500, "server_error")}))
    code, first = _regrade(capsys, db, prompt, url, "--batch", "--no-wait")
    assert code == 0 and first["pending"] == 6 and len(first["jobs"]) == 1
    assert main(["batch", "status", "--store", str(db), "--base-url", url, "--format", "json"]) == 0
    (job,) = json.loads(capsys.readouterr().out)
    assert job["phase"] == "submitted" and job["remote_status"] == "in_progress"
    assert job["n_requests"] == 6 and job["prompt"] == "passage@2"
    collect = ["batch", "collect", "--store", str(db), "--base-url", url]
    code = main(
        [*collect, "--poll-interval", "0", "--prices", prices_file(tmp_path), "--format", "json"]
    )
    assert code == 0
    collected = json.loads(capsys.readouterr().out)  # the diff regrade would print
    assert collected["n"] == 6 and collected["pending"] == 0 and collected["batch_graded"] == 5
    assert api.server.counts["requests"] == 1  # the error line, re-asked live
    main(["batch", "status", "--store", str(db), "--no-refresh", "--format", "json"])
    (job,) = json.loads(capsys.readouterr().out)
    assert job["phase"] == "collected"
    code, diff = _regrade(capsys, db, prompt, url, "--batch")
    assert code == 0 and diff["sent"] == 0 and diff["pending"] == 0
    assert diff["batch_graded"] == 5 and diff["failed"] == 0
    assert diff["cost_without_batch"] > diff["cost"] > 0
    assert api.counts["upload"] == 1


@pytest.mark.slow
def test_no_wait_writes_no_outputs_until_the_batches_are_collected(
    api: FakeBatchAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    seed_store(db, 6)
    prompt = Path(new_prompt(tmp_path).source)
    url = api.server.base_url
    out, qrels = tmp_path / "new.jsonl", tmp_path / "new.qrels"
    out.write_text("earlier\n", encoding="utf-8")
    api.plan(BatchPlan(polls_in_progress=2))
    code = main(
        [
            "regrade", "--store", str(db), "--prompt", str(prompt), "--model", "fake-model",
            "--base-url", url, "--poll-interval", "0", "--quiet", "--prices", prices_file(tmp_path),
            "--batch", "--no-wait", "--out", str(out), "--qrels-out", str(qrels),
        ]
    )  # fmt: skip
    assert code == 0
    err = capsys.readouterr().err
    assert "not written while pairs are pending" in err and "rerun" in err
    assert out.read_text(encoding="utf-8") == "earlier\n"  # left as it was, not emptied
    assert not qrels.exists()
    collect = ["batch", "collect", "--store", str(db), "--base-url", url]
    assert main([*collect, "--poll-interval", "0", "--prices", prices_file(tmp_path)]) == 0
    capsys.readouterr()
    code, diff = _regrade(
        capsys, db, prompt, url, "--batch", "--out", str(out), "--qrels-out", str(qrels)
    )
    assert code == 0 and diff["sent"] == 0 and diff["pending"] == 0
    assert len(read_judgments(out)) == 6 and len(read_qrels(qrels)) == 6


@pytest.mark.slow
def test_selections(api: FakeBatchAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "s.db"
    seed_store(db, 8, failed=(5,))  # old grades 0,1,2,3,0,(failed),2,3
    prompt = Path(new_prompt(tmp_path).source)
    url = api.server.base_url
    code, low = _regrade(capsys, db, prompt, url, "--select", "grade<=1")
    assert low["n"] == 3 and code == 0  # d0, d1, d4
    code, failed = _regrade(capsys, db, prompt, url, "--select", "failed")
    assert failed["n"] == 1 and failed["compared"] == 0
    sample = tmp_path / "sample.csv"
    sample.write_text("query_id,doc_id,grade\nq0,d2,\nq2,d7,\n", encoding="utf-8")
    code, picked = _regrade(capsys, db, prompt, url, "--select", "sample", str(sample))
    assert picked["n"] == 2
    code, by_prompt = _regrade(capsys, db, prompt, url, "--select", "prompt=passage@1", "grade<=2")
    assert by_prompt["n"] == 5 and by_prompt["selected"] == 5
    assert main(["regrade", "--store", str(db), "--prompt", str(prompt), "--select", "bogus"]) == 2


def test_metric_deltas_for_a_run(
    api: FakeBatchAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    seed_store(db, 6)
    prompt = Path(new_prompt(tmp_path).source)
    run = tmp_path / "bm25.run"
    run.write_text(
        "".join(f"q{i // 3} Q0 d{i} {i % 3 + 1} {10 - i} bm25\n" for i in range(6)),
        encoding="utf-8",
    )
    code, diff = _regrade(
        capsys, db, prompt, api.server.base_url, "--run", str(run), "-m", "nDCG@10"
    )
    assert code == 0
    (delta,) = diff["metric_deltas"]
    assert delta["run"] == "bm25" and delta["measure"] == "nDCG@10"
    assert delta["delta"] == pytest.approx(delta["new"] - delta["old"])
    if diff["changed"] == 0:
        assert delta["delta"] == 0


def test_table_output(
    api: FakeBatchAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    seed_store(db, 4)
    prompt = Path(new_prompt(tmp_path).source)
    args = ["regrade", "--store", str(db), "--prompt", str(prompt), "--model", "fake-model"]
    report = tmp_path / "diff.html"
    assert main([*args, "--base-url", api.server.base_url, "--quiet", "--report", str(report)]) == 0
    text = capsys.readouterr().out
    assert "transition (rows: old grade, columns: new grade)" in text
    assert "kappa between versions" in text
    assert "cost unknown (no price for the model)" in text  # the scripted model has no price
    page = report.read_text(encoding="utf-8")
    assert '<span id="n">4</span>' in page and 'id="transition"' in page
    assert "passage@1 &rarr; passage@2 (fake-model)" in page
    assert "http" not in page.split("<body>")[0]  # self-contained: nothing fetched


def test_dry_run_sends_nothing(
    api: FakeBatchAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    seed_store(db, 6)
    prompt = Path(new_prompt(tmp_path).source)
    args = ["regrade", "--store", str(db), "--prompt", str(prompt), "--model", "fake-model"]
    prices = ["--prices", prices_file(tmp_path)]
    assert main([*args, "--base-url", api.server.base_url, "--dry-run", *prices]) == 0
    err = capsys.readouterr().err
    assert "6 pairs selected" in err and "would send 6 requests" in err
    assert "by batch" in err and "nothing was sent" in err
    assert api.server.counts["requests"] == 0 and api.counts["upload"] == 0
    with Store(db) as store:
        assert store.count() == 6


def test_pairs_the_store_cannot_regrade_are_said_not_dropped_silently(
    api: FakeBatchAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    seed_store(db, 6)
    with sqlite3.connect(db) as conn:  # as a store graded before texts were kept
        conn.execute("DELETE FROM docs WHERE doc_id IN ('d4', 'd5')")
    conn.close()
    prompt = Path(new_prompt(tmp_path).source)
    args = ["regrade", "--store", str(db), "--prompt", str(prompt), "--model", "fake-model"]
    prices = ["--prices", prices_file(tmp_path)]
    assert main([*args, "--base-url", api.server.base_url, "--dry-run", *prices]) == 0
    err = capsys.readouterr().err
    assert "note: 2 stored pairs have no query or document text in the store" in err
    assert "4 pairs selected" in err and "would send 4 requests" in err


@pytest.mark.slow
def test_one_collected_batch_is_one_batch(
    api: FakeBatchAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    seed_store(db, 6)
    prompt = new_prompt(tmp_path).source
    url = api.server.base_url
    argv = ["regrade", "--store", str(db), "--prompt", str(prompt), "--model", "fake-model"]
    argv += ["--base-url", url, "--poll-interval", "0", "--quiet", "--batch"]
    api.plan(BatchPlan(polls_in_progress=2))  # still running when --no-wait returns
    assert main([*argv, "--no-wait"]) == 0
    capsys.readouterr()
    collect = ["batch", "collect", "--store", str(db), "--base-url", url]
    assert main([*collect, "--poll-interval", "0"]) == 0
    err = capsys.readouterr().err
    assert "collected 1 batch (6 pairs)" in err and "batches" not in err

    db2 = tmp_path / "s2.db"
    seed_store(db2, 6)
    argv[2] = str(db2)
    argv.remove("--quiet")
    assert main(argv) == 0  # waits for its batch, then says what it collected
    said = capsys.readouterr()
    assert "; collected 1 batch: 6 from the batch" in said.out + said.err
