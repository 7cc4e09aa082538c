"""Failures tell their cause and stop when nothing can succeed, through the command line:
refused connections at the start stop a 200-pair run after one round of requests (exit 2, the
URL and "connection refused"), an unknown host names the DNS failure, summaries group failures
by cause, and `regrade --batch` on a server without the Batch API exits 2 saying to drop --batch.
"""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.job.summary import failure_causes_text
from grader.judges.failures import failure_cause
from grader.judges.llm.judge import LLMJudge
from grader.judges.llm.retry import RetryPolicy
from grader.models import Doc, Judgment, JudgmentError, Query
from grader.prompts import load_prompt
from grader.store.store import Store
from tests.batch_helpers import new_prompt, seed_store
from tests.fakeserver import FakeServer, faults
from tests.grade_data import write_grade_files


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeServer]:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RELGRADE_MODEL", "RELGRADE_PRICES"):
        monkeypatch.delenv(name, raising=False)
    with FakeServer() as fake:
        yield fake


def _free_port_url() -> str:
    with socket.socket() as sock:  # a port nobody listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


@pytest.mark.slow
def test_refused_connections_at_the_start_stop_200_pairs_after_one_round(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_grade_files(tmp_path, n_queries=20, depth=10)
    assert files.n_pairs == 200
    url = "http://127.0.0.1:1/v1"
    store = tmp_path / "s.db"
    args = files.args("--base-url", url, "--store", store, "--model", "m", "--quiet")
    assert main([*args, "--out", str(tmp_path / "j.jsonl")]) == 2
    err = capsys.readouterr().err
    assert f"{url} is not answering" in err
    assert "the first 8 requests could not connect (connection refused" in err
    with Store(store) as s:
        assert s.count() == 0  # nothing stored, none as failed
        attempts = s.calls()
    # One round of the 8 workers, not 16+ with backoff, nor 200 x 4.
    assert len(attempts) == 8
    assert all("connection refused" in str(c["error_message"]) for c in attempts)
    assert not (tmp_path / "j.jsonl").exists()


@pytest.mark.slow
def test_an_unknown_host_stops_naming_the_dns_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_grade_files(tmp_path, n_queries=2, depth=2)
    url = "http://relgrade-no-such-host.invalid/v1"
    args = files.args("--base-url", url, "--store", tmp_path / "s.db", "--model", "m")
    assert main([*args, "--quiet", "--concurrency", "2"]) == 2
    err = capsys.readouterr().err
    assert f"{url} is not answering" in err and "DNS lookup failed" in err


async def test_a_refused_connection_is_recorded_with_its_cause() -> None:
    # Without the early stop, a pair that could never connect fails, and says why.
    judge = LLMJudge(
        model="m",
        prompt=load_prompt("passage-v1"),
        base_url=_free_port_url(),
        policy=RetryPolicy(max_attempts=2, base_delay=0.001, max_delay=0.002),
        unreachable_after=None,
    )
    query, doc = Query(query_id="q", text="cats"), Doc(doc_id="d", text="cats purr")
    judgment = await judge.judge(query, doc, key="sha256:k")
    await judge.aclose()
    assert judgment.status == "failed" and judgment.grade is None
    assert judgment.error is not None and judgment.error.type == "APIConnectionError"
    assert "(connection refused:" in judgment.error.message
    assert failure_cause(judgment.error) == "connection refused"


def test_failure_causes_are_counted_most_frequent_first() -> None:
    def failed(doc_id: str, kind: str, message: str) -> Judgment:
        error = JudgmentError(type=kind, message=message)
        return Judgment(
            query_id="q", doc_id=doc_id, status="failed", judge="j", key=doc_id, error=error
        )

    refused = "Connection error. (connection refused: [Errno 111] Connect call failed)"
    judgments = [failed(f"r{i}", "APIConnectionError", refused) for i in range(3)]
    judgments += [failed("t", "APITimeoutError", "Request timed out.")]
    judgments += [failed(f"s{i}", "InternalServerError", "503 busy") for i in range(2)]
    judgments += [failed("v", "InvalidReply", "bad_grade: 7 is not one of 0..3")]
    ok = Judgment(query_id="q", doc_id="ok", status="ok", grade=1, judge="j", key="ok")
    assert failure_causes_text([ok, *judgments]) == (
        "failed 7: connection refused ×3, HTTP 503 ×2, invalid reply (bad_grade) ×1, timeout ×1"
    )
    assert failure_causes_text([ok]) == ""


@pytest.mark.slow
def test_grade_and_regrade_summaries_group_failures_by_cause(
    server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_grade_files(tmp_path, n_queries=5, depth=2)
    server.default_fault = faults.server_error(503)
    store = tmp_path / "s.db"
    args = files.args("--base-url", server.base_url, "--store", store, "--model", "m")
    assert main([*args, "--quiet", "--max-attempts", "1"]) == 1
    assert "failed 10: HTTP 503 ×10" in capsys.readouterr().err

    db = tmp_path / "r.db"
    seed_store(db, 6)
    prompt = str(new_prompt(tmp_path).source)
    regrade = ["regrade", "--store", str(db), "--prompt", prompt, "--model", "m"]
    regrade += ["--base-url", server.base_url, "--max-attempts", "1", "--quiet"]
    assert main(regrade) == 1
    assert "failed 6: HTTP 503 ×6" in capsys.readouterr().err


@pytest.mark.slow
def test_regrade_batch_on_a_server_without_the_batch_api_exits_2(
    server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    seed_store(db, 6)
    prompt = str(new_prompt(tmp_path).source)
    args = ["regrade", "--store", str(db), "--prompt", prompt, "--model", "m", "--batch"]
    assert main([*args, "--base-url", server.base_url, "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "this server has no Batch API; drop --batch to regrade concurrently" in err
    assert server.base_url.rstrip("/") in err
    with sqlite3.connect(db) as conn:  # no job left holding the pairs back
        assert conn.execute("SELECT COUNT(*) FROM batch_jobs").fetchone() == (0,)
    # As told: without --batch the same regrade works on that server.
    assert main([*args[:-1], "--base-url", server.base_url, "--quiet"]) == 0
