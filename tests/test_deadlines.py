"""Every request has a deadline, and a dead server stops the run (issue 11, section 3).

Through the real SDK against the fake server on a real socket: a reply trickled one byte every
0.2 s is cut off at `--timeout` as a whole (not per read) and retried; a server that accepts and
never answers, or refuses connections, stops `grade` with exit 2 after the not-answering threshold,
having sent a small fraction of `pairs x attempts` requests (counted at the server), with the store
keeping what was answered and the unfinished pairs neither failed nor stored; a pair the lexical
judge can never grade is reported as permanent, not as something a rerun retries.

No wall time is asserted: where a missing deadline would make a test run for minutes, the test
bounds itself (`asyncio.wait_for`) far above the expected time, so it fails instead of hanging.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from grader.batch.api.client import BatchClient
from grader.cli.main import main
from grader.errors import JudgeError, ServerNotAnswering
from grader.job.summary import failed_pairs_text
from grader.judges.failures import failure_kind
from grader.judges.llm.judge import LLMJudge
from grader.judges.llm.retry import RetryPolicy
from grader.judges.llm.transport import DEAD_AFTER, ServerHealth, dead_after_for
from grader.models import CallRecord, Doc, Judgment, JudgmentError, Query
from grader.prompts import load_prompt
from grader.store.store import Store
from tests.batch_helpers import new_prompt, seed_store
from tests.fakeserver import FakeServer, faults
from tests.grade_data import GradeFiles, write_grade_files
from tests.helpers.judgments import stored_judgments

QUERY = Query(query_id="q1", text="how do cats purr")
DOC = Doc(doc_id="d1", text="Cats purr by vibrating the muscles of the larynx.")
FAST = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.05)
BOUND_S = 30.0  # a test's own bound: a trickled reply without a deadline takes minutes


@pytest.fixture
def server() -> Iterator[FakeServer]:
    """A server of the test's own: hung and trickling handlers end when it stops."""
    with FakeServer() as fake:
        yield fake


def _judge(server: FakeServer, calls: list[CallRecord], **options: object) -> LLMJudge:
    settings: dict[str, object] = {
        "model": "gpt-4o-mini",
        "prompt": load_prompt("passage-v1"),
        "base_url": server.base_url,
        "api_key": "sk-test-deadlines",
        "policy": FAST,
        "timeout": 1.0,
        "on_call": calls.append,
    }
    settings.update(options)
    return LLMJudge(**settings)  # type: ignore[arg-type]


def _reply_bytes(server: FakeServer) -> int:
    """Length of the valid reply the fake trickles for QUERY/DOC (one byte per interval)."""
    judge = _judge(server, [])
    body = judge.build_request(QUERY, DOC)
    return len(json.dumps(server.completion_for(body)).encode())


# -- the whole request is bounded ------------------------------------------------------------


@pytest.mark.slow
async def test_trickled_reply_is_cut_at_the_deadline_and_retried(server: FakeServer) -> None:
    # At 0.2 s a byte, the reply would take minutes; every read is quick, so only a deadline on
    # the whole request ends it.
    assert _reply_bytes(server) * 0.2 > 10 * BOUND_S
    server.enqueue(faults.trickle(0.2))
    calls: list[CallRecord] = []
    judge = _judge(server, calls)
    judgment = await asyncio.wait_for(judge.judge(QUERY, DOC, key="sha256:k"), BOUND_S)
    await judge.aclose()
    assert judgment.status == "ok" and judgment.grade is not None
    assert judgment.attempts == 2
    assert [c.error_type for c in calls] == ["APITimeoutError", None]
    assert server.counts["requests"] == 2 and server.counts["trickle"] == 1


@pytest.mark.slow
async def test_a_server_that_always_trickles_fails_the_pair_as_a_timeout(
    server: FakeServer,
) -> None:
    server.default_fault = faults.trickle(0.2)
    calls: list[CallRecord] = []
    judge = _judge(server, calls)
    judgment = await asyncio.wait_for(judge.judge(QUERY, DOC, key="sha256:k"), BOUND_S)
    await judge.aclose()
    assert judgment.status == "failed" and judgment.grade is None
    assert judgment.error is not None and judgment.error.type == "APITimeoutError"
    assert judgment.attempts == FAST.max_attempts
    assert server.counts["requests"] == FAST.max_attempts
    assert [c.outcome for c in calls] == ["retry"] * FAST.max_attempts


@pytest.mark.slow
def test_grade_cli_trickle_with_timeout_1_fails_each_pair_after_its_attempts(
    server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_grade_files(tmp_path, n_queries=2, depth=1)
    server.default_fault = faults.trickle(0.2)
    store = tmp_path / "s.db"
    args = files.args(
        "--base-url", server.base_url, "--store", store, "--timeout", "1", "--max-attempts", "2"
    )
    args += ["--quiet", "--model", "gpt-4o-mini"]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 1, err
    assert server.counts["requests"] == files.n_pairs * 2  # 4 timeouts: below the threshold
    with Store(store) as s:
        stored = list(stored_judgments(s))
    assert len(stored) == files.n_pairs
    assert all(j.status == "failed" and j.grade is None for j in stored)
    assert {j.error.type for j in stored if j.error} == {"APITimeoutError"}
    assert "rerunning the same command retries them" in err
    assert "permanently" not in err


@pytest.mark.slow
async def test_batch_client_calls_are_bounded_as_a_whole(server: FakeServer) -> None:
    status_calls = 0

    async def trickled_batch(request: Request) -> Response:
        nonlocal status_calls
        status_calls += 1
        payload = json.dumps({"id": request.path_params["bid"], "status": "completed"}).encode()

        async def one_byte_at_a_time() -> AsyncIterator[bytes]:
            for i in range(len(payload)):
                await asyncio.sleep(0.2)
                yield payload[i : i + 1]

        return StreamingResponse(one_byte_at_a_time(), media_type="application/json")

    server.add_route("/v1/batches/{bid}", trickled_batch, methods=["GET"])
    client = BatchClient(base_url=server.base_url, api_key="sk-test", timeout=0.5, policy=FAST)
    with pytest.raises(JudgeError, match="Batch API status failed: APITimeoutError"):
        await asyncio.wait_for(client.retrieve("batch_1"), BOUND_S)
    await client.close()
    assert status_calls == FAST.max_attempts


# -- a dead server stops the run ---------------------------------------------------------------


def test_health_counts_failures_in_a_row_and_an_answer_resets_them() -> None:
    health = ServerHealth(4)
    for _ in range(3):
        assert not health.failed()
    health.answered()  # a 5xx counts too: the server is there
    assert [health.failed() for _ in range(4)] == [False, False, False, True]
    health.answered()  # a late answer does not revive a server declared dead
    assert health.dead and health.failed()
    assert dead_after_for(1) == DEAD_AFTER == 16
    assert dead_after_for(8) == 16 and dead_after_for(32) == 64
    with pytest.raises(ValueError):
        ServerHealth(0)


def _forty_pairs(tmp_path: Path) -> GradeFiles:
    files = write_grade_files(tmp_path, n_queries=10, depth=4)
    assert files.n_pairs == 40
    return files


@pytest.mark.slow
def test_never_answering_server_stops_grade_with_exit_2_after_the_threshold(
    server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _forty_pairs(tmp_path)
    server.default_fault = faults.hang()
    store = tmp_path / "s.db"
    args = files.args("--base-url", server.base_url, "--store", store, "--timeout", "1")
    args += ["--quiet", "--model", "gpt-4o-mini", "--out", str(tmp_path / "j.jsonl")]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{server.base_url} is not answering" in err
    assert "16 requests in a row timed out" in err and "rerun the same command" in err
    # Defaults: concurrency 8, 4 attempts: the threshold is 16 requests, not 40 x 4 = 160.
    sent = server.counts["requests"]
    assert 16 <= sent <= 16 + 8, sent
    assert sent < files.n_pairs
    with Store(store) as s:
        assert s.count() == 0  # nothing answered: no pair is stored, none as failed
    assert not (tmp_path / "j.jsonl").exists()


@pytest.mark.slow
def test_refused_connections_stop_the_run_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _forty_pairs(tmp_path)
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    store = tmp_path / "s.db"
    args = files.args("--base-url", url, "--store", store, "--quiet", "--model", "gpt-4o-mini")
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"{url} is not answering" in err
    # Nothing ever answered: the first round of refused connections stops it (issue 13).
    assert "the first 8 requests could not connect (connection refused" in err
    with Store(store) as s:
        assert s.count() == 0


@pytest.mark.slow
def test_server_dying_mid_run_keeps_the_answers_and_a_rerun_does_the_rest(
    server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _forty_pairs(tmp_path)
    answered = 10
    server.enqueue(*[faults.slow(0.0)] * answered)  # ten valid replies, then silence
    server.default_fault = faults.hang()
    store = tmp_path / "s.db"
    args = files.args("--base-url", server.base_url, "--store", store, "--timeout", "1")
    args += ["--quiet", "--model", "gpt-4o-mini"]
    assert main(args) == 2
    assert "is not answering" in capsys.readouterr().err
    first_run = server.counts["requests"]
    assert first_run <= answered + 16 + 8  # the threshold (16 at concurrency 8) and the workers
    with Store(store) as s:
        judgments = list(stored_judgments(s))
    assert len(judgments) == answered, [
        (j.status, j.attempts, j.error) for j in judgments if j.status != "ok"
    ]
    assert all(j.status == "ok" for j in judgments)

    server.default_fault = None  # the server is back
    server.reset()
    out = tmp_path / "j.jsonl"
    assert main([*args, "--out", str(out)]) == 0
    assert server.counts["requests"] == files.n_pairs - answered  # only the unfinished pairs
    assert "graded 30, cached 10, failed 0" in capsys.readouterr().err


@pytest.mark.slow
def test_a_server_answering_some_5xx_is_not_declared_dead(
    server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 19 answers of 20 are 503s: more failures than the threshold, but never 16 in a row (a
    # good answer in between), and every one an answer. The same error to everything is given
    # up on (tests/test_slow_not_dead.py).
    files = write_grade_files(tmp_path, n_queries=5, depth=4)
    errors = [faults.server_error(503)] * (files.n_pairs - 1)
    server.enqueue(*errors[:10], faults.slow(0.0), *errors[10:])
    args = files.args("--base-url", server.base_url, "--store", tmp_path / "s.db", "--quiet")
    args += ["--model", "gpt-4o-mini", "--max-attempts", "1"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "not answering" not in err
    assert f"{files.n_pairs - 1} pairs failed on transport or server errors" in err
    assert server.counts["requests"] == files.n_pairs


@pytest.mark.slow
async def test_judge_raises_not_answering_and_stores_nothing_for_the_pair(
    server: FakeServer,
) -> None:
    server.default_fault = faults.hang()
    calls: list[CallRecord] = []
    judge = _judge(server, calls, timeout=0.3, dead_after=2, policy=FAST)
    with pytest.raises(ServerNotAnswering, match="is not answering: 2 requests in a row"):
        await asyncio.wait_for(judge.judge(QUERY, DOC, key="sha256:k"), BOUND_S)
    # A second pair sends nothing: the judge already knows.
    with pytest.raises(ServerNotAnswering):
        await judge.judge(QUERY, DOC, key="sha256:k2")
    await judge.aclose()
    assert server.counts["requests"] == 2
    assert ServerNotAnswering.exit_code == 2 and issubclass(ServerNotAnswering, JudgeError)


# -- permanent failures are called permanent ----------------------------------------------------


def test_lexical_failure_on_an_emoji_query_is_reported_as_permanent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_grade_files(tmp_path, n_queries=2, depth=2)
    lines = files.queries.read_text().splitlines()
    lines[0] = "q0\t\U0001f642\U0001f642\U0001f680"
    files.queries.write_text("\n".join(lines) + "\n")
    args = files.args("--judge", "lexical", "--store", tmp_path / "s.db", "--quiet")
    for _ in range(2):  # the same on every run: that is what permanent means
        assert main(args) == 1
        err = capsys.readouterr().err
        assert "2 pairs failed permanently and are left out of the qrels" in err
        assert "rerunning will not change them" in err
        assert "NoQueryTerms" in err and "query q0" in err
        assert "retries them" not in err


@pytest.mark.parametrize(
    ("error_type", "message", "kind"),
    [
        ("APITimeoutError", "Request timed out.", "transient"),
        ("APIConnectionError", "Connection error.", "transient"),
        ("InternalServerError", "503 The server had an error", "transient"),
        ("RateLimitError", "429 Rate limit reached", "transient"),
        ("APIStatusError", "408 Request Timeout", "transient"),
        ("APIStatusError", "413 Payload Too Large", "permanent"),
        ("BadRequestError", "400 maximum context length exceeded", "permanent"),
        ("NoQueryTerms", "no scorable terms", "permanent"),
        ("InvalidReply", "bad_grade: 7 is not one of 0..3", "invalid"),
    ],
)
def test_failure_kind_tells_what_a_rerun_can_fix(error_type: str, message: str, kind: str) -> None:
    assert failure_kind(JudgmentError(type=error_type, message=message)) == kind


def test_mixed_failures_are_counted_by_kind() -> None:
    def failed(doc_id: str, error_type: str) -> Judgment:
        error = JudgmentError(type=error_type, message="m")
        return Judgment(
            query_id="q", doc_id=doc_id, status="failed", judge="j", key="k", error=error
        )

    ok = Judgment(query_id="q", doc_id="d0", status="ok", grade=2, judge="j", key="k")
    judgments = [ok, failed("d1", "APITimeoutError"), failed("d2", "APITimeoutError")]
    judgments += [failed("d3", "NoQueryTerms"), failed("d4", "InvalidReply")]
    lines = failed_pairs_text(judgments).splitlines()
    assert lines[0] == "4 pairs failed and are left out of the qrels:"
    assert lines[1].startswith("  2 on transport or server errors") and "retries them" in lines[1]
    assert lines[2].startswith("  1 with no valid reply") and "doc d4" in lines[2]
    assert lines[3].startswith("  1 permanently") and "doc d3: NoQueryTerms: m" in lines[3]
    assert failed_pairs_text([ok]) == ""


@pytest.mark.slow
def test_regrade_stops_on_a_dead_server_too(
    server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    olds = seed_store(db, 20)
    prompt = str(new_prompt(tmp_path).source)
    server.default_fault = faults.hang()
    args = ["regrade", "--store", str(db), "--prompt", prompt, "--model", "fake-model"]
    args += ["--base-url", server.base_url, "--timeout", "1", "--quiet"]
    assert main(args) == 2
    assert f"{server.base_url} is not answering" in capsys.readouterr().err
    assert server.counts["requests"] <= 16 + 8 < len(olds) * 4
    with Store(db) as store:
        assert store.count() == len(olds)  # the old versions only: nothing new, nothing failed
