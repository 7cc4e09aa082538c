"""`regrade --batch --no-wait` prints one line with the command that follows it, and that command,
pasted, works (the endpoint is stored with the job, never the key); its JSON says what was
submitted and how to follow."""

from __future__ import annotations

import json
import shlex
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.cli.main import main
from tests.batch_helpers import new_prompt, seed_store
from tests.fake_batch import BatchPlan, FakeBatchAPI
from tests.fakeserver import FakeServer


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeServer]:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RELGRADE_MODEL", "RELGRADE_PRICES"):
        monkeypatch.delenv(name, raising=False)
    with FakeServer() as fake:
        yield fake


def _batch_server(server: FakeServer) -> FakeBatchAPI:
    api = FakeBatchAPI(server)
    api.plan(BatchPlan(polls_in_progress=2))  # still running when --no-wait exits
    return api


@pytest.mark.slow
def test_no_wait_prints_one_line_whose_command_works_when_pasted(
    server: FakeServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    api = _batch_server(server)
    monkeypatch.chdir(tmp_path)
    seed_store(tmp_path / "dl.db", 6)
    prompt = str(new_prompt(tmp_path).source)
    args = ["regrade", "--store", "dl.db", "--prompt", prompt, "--model", "m", "--batch"]
    args += ["--base-url", server.base_url, "--no-wait", "--quiet", "--poll-interval", "0"]
    assert main(args) == 0
    out = capsys.readouterr().out
    (line,) = out.splitlines()  # one line, no transition matrix of zeros
    assert line.startswith("submitted 6 requests (6 pairs) in 1 batch (1 input file) to ")
    assert "kappa" not in out and "$0.0000" not in out
    follow = line.split("; follow with: ", 1)[1]
    assert follow == "relgrade batch collect --store dl.db"
    with sqlite3.connect(tmp_path / "dl.db") as conn:
        ((stored,),) = conn.execute("SELECT base_url FROM batch_jobs").fetchall()
    assert stored == server.base_url.rstrip("/")

    # `batch status` with no --base-url reaches the stored endpoint, and its own hint works too.
    assert main(["batch", "status", "--store", "dl.db"]) == 0
    captured = capsys.readouterr()
    assert f"endpoint {stored} (stored with the batch jobs" in captured.err
    assert "in_progress" in captured.out
    assert "`relgrade batch collect --store dl.db` finishes them" in captured.out

    words = shlex.split(follow)
    assert words[0] == "relgrade"
    assert main(words[1:]) == 0  # pasted as printed
    err = capsys.readouterr().err
    assert "collected 1 batch" in err and "(6 pairs): 6 graded from the batch" in err
    assert server.counts["requests"] == 0 and api.counts["upload"] == 1
    assert main(["batch", "status", "--store", "dl.db", "--format", "json"]) == 0
    (job,) = json.loads(capsys.readouterr().out)
    assert job["phase"] == "collected" and job["base_url"] == stored


@pytest.mark.slow
def test_no_wait_json_says_what_was_submitted_and_how_to_follow(
    server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _batch_server(server)
    db = tmp_path / "s.db"
    seed_store(db, 6)
    prompt = str(new_prompt(tmp_path).source)
    args = ["regrade", "--store", str(db), "--prompt", prompt, "--model", "m", "--batch"]
    args += ["--base-url", server.base_url, "--no-wait", "--quiet", "--format", "json"]
    assert main(args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["submitted"] == {
        "requests": 6,
        "pairs": 6,
        "batches": 1,
        "files": 1,
        "jobs": data["jobs"],
        "base_url": server.base_url.rstrip("/"),
    }
    assert data["pending"] == 6 and len(data["jobs"]) == 1
    assert data["follow"] == f"relgrade batch collect --store {shlex.quote(str(db))}"
    assert data["status"] == f"relgrade batch status --store {shlex.quote(str(db))}"
