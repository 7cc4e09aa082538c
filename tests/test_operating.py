"""Operating relgrade (issue 13, sections 1 and 2), each point through the command line.

Failures tell their cause and stop when nothing can succeed: refused connections at the start stop
a 200-pair run after one round of requests (exit 2, the URL and "connection refused"); summaries
group failures by cause; `regrade --batch` on a server without the Batch API exits 2 saying to
drop --batch; `--no-wait` prints one line with the command that follows it, and that command,
pasted, works (the endpoint is stored with the job, never the key). The lexical judge says which
settings file it reads and stamps non-default settings into its id; a prompt edited under the
same name@version is refused, and a version bump that changes nothing is said.
"""

from __future__ import annotations

import json
import shlex
import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.cli.failed_pairs import failure_causes_text
from grader.cli.main import main
from grader.io.judgments import read_judgments
from grader.judges.failures import failure_cause
from grader.judges.llm.judge import LLMJudge
from grader.judges.llm.retry import RetryPolicy
from grader.models import Doc, Judgment, JudgmentError, Query
from grader.prompts import load_prompt
from grader.store.store import Store
from tests.batch_helpers import new_prompt, seed_store
from tests.fake_batch import BatchPlan, FakeBatchAPI
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


# -- 1. failures tell the cause and stop when nothing can succeed -------------------------------


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


# -- 2. state lives in the store, so hints work as printed ---------------------------------------


def _batch_server(server: FakeServer) -> FakeBatchAPI:
    api = FakeBatchAPI(server)
    api.plan(BatchPlan(polls_in_progress=2))  # still running when --no-wait exits
    return api


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


def test_fitted_lexical_settings_are_said_and_never_share_a_key_with_the_default(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RELGRADE_LEXICAL_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    files = write_grade_files(tmp_path, n_queries=3, depth=4)
    args = files.args("--judge", "lexical", "--store", "s.db", "--quiet")
    assert main([*args, "--out", "default.jsonl"]) == 0
    err = capsys.readouterr().err
    assert "lexical judge settings: " in err and "lexical-v1.toml (the shipped default" in err
    default = read_judgments(tmp_path / "default.jsonl")
    assert {j.judge for j in default} == {"lexical"}  # as before: default stores keep hitting
    assert main(args) == 0
    assert "graded 0, cached 12" in capsys.readouterr().err

    # What calibrate --fit-lexical leaves in the working folder, read without being named.
    fitted_file = tmp_path / "relgrade-lexical.toml"
    fitted_file.write_text(
        'kind = "lexical-thresholds"\nname = "lexical"\nversion = "1"\n[scoring]\n'
        "[thresholds]\nt1 = 0.1\nt2 = 0.3\nt3 = 0.6\n",
        encoding="utf-8",
    )
    assert main([*args, "--out", "fitted.jsonl"]) == 0
    err = capsys.readouterr().err
    assert "lexical judge settings: relgrade-lexical.toml (not the shipped default" in err
    assert "graded 12, cached 0" in err  # nothing taken from the default's answers
    fitted = read_judgments(tmp_path / "fitted.jsonl")
    (judge_id,) = {j.judge for j in fitted}
    assert fitted[0].prompt is not None
    assert judge_id == f"lexical+{fitted[0].prompt.sha256[:8]}" and judge_id in err
    assert not {j.key for j in default} & {j.key for j in fitted}


def test_a_prompt_edited_under_the_same_version_is_refused(
    server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_grade_files(tmp_path, n_queries=2, depth=2)
    store = tmp_path / "s.db"
    base = files.args("--base-url", server.base_url, "--store", store, "--model", "m", "--quiet")
    assert main([*base, "--prompt", "passage-v1"]) == 0
    capsys.readouterr()
    shipped = Path(load_prompt("passage-v1").source).read_text(encoding="utf-8")
    edited = tmp_path / "my-passage.toml"  # edited text, version left at 1
    edited.write_text(shipped.replace("Grade how relevant", "Grade strictly how relevant"))
    sent = server.counts["requests"]
    assert main([*base, "--prompt", str(edited)]) == 2
    err = capsys.readouterr().err
    assert "prompt passage@1 changed since it was used: bump its version" in err
    assert server.counts["requests"] == sent  # refused before sending anything
    regrade = ["regrade", "--store", str(store), "--prompt", str(edited), "--model", "m2"]
    regrade += ["--base-url", server.base_url, "--quiet"]
    assert main(regrade) == 2
    assert "prompt passage@1 changed since it was used" in capsys.readouterr().err
    assert main([*base, "--prompt", str(edited), "--allow-changed-prompt"]) == 0
    assert "kept by --allow-changed-prompt" in capsys.readouterr().err

    bumped = tmp_path / "passage-v2.toml"  # same text, version 2
    bumped.write_text(shipped.replace('version = "1"', 'version = "2"'), encoding="utf-8")
    assert main([*base, "--prompt", str(bumped)]) == 0
    err = capsys.readouterr().err
    assert "prompt passage@2 asks exactly what passage@1 (in the store) asked" in err
    assert "only its version changed" in err
