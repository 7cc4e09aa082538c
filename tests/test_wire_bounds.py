"""Every request has a deadline and a size bound on the wire (issue 36, section 1).

Against the fake server on a real socket: a server that trickles its reply one byte every 0.5 s
(body or headers, on the chat route and on `GET /v1/models`) ends a run of one pair with
`--timeout 3 --max-attempts 1` with the pair failed, the connection closed by the client (the
server sees the hang-up); a body that never ends is cut at the reply bound, the attempt failed
with "reply larger than N bytes", and the test process's memory does not follow the body.

The command runs as a child process with a bound of its own far above the expected time (a
missing deadline makes it run for minutes), so a regression fails instead of hanging; no wall
time is asserted.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from grader.batch.api.client import BatchClient
from grader.errors import JudgeError
from grader.judges.llm.client import MiB
from grader.judges.llm.judge import LLMJudge
from grader.judges.llm.retry import RetryPolicy
from grader.models import CallRecord, Doc, Query
from grader.prompts import load_prompt
from grader.store.store import Store
from tests.fakeserver import FakeServer, faults
from tests.grade_data import write_grade_files
from tests.helpers.judgments import stored_judgments

QUERY = Query(query_id="q1", text="how do cats purr")
DOC = Doc(doc_id="d1", text="Cats purr by vibrating the muscles of the larynx.")
CHILD_BOUND_S = 120.0
ONE = RetryPolicy(max_attempts=1, base_delay=0.01, max_delay=0.05)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as fake:
        yield fake


def _grade_one_pair(server: FakeServer, tmp_path: Path) -> tuple[int, str, Path]:
    """`relgrade grade` of one pair, `--timeout 3 --max-attempts 1`, in a child process."""
    files = write_grade_files(tmp_path, n_queries=1, depth=1)
    store = tmp_path / "s.db"
    args = files.args("--base-url", server.base_url, "--store", store, "--timeout", "3")
    args += ["--max-attempts", "1", "--quiet", "--model", "gpt-4o-mini"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    done = subprocess.run(
        [sys.executable, "-m", "grader.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=CHILD_BOUND_S,
        env=env,
    )
    return done.returncode, done.stderr, store


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["trickle", "trickle_headers"])
def test_a_trickling_server_ends_a_one_pair_run_at_the_deadline(
    server: FakeServer, tmp_path: Path, fault: str
) -> None:
    # One byte every 0.5 s: each read is quick, the whole reply never comes. The models probe
    # trickles the same way, so every HTTP call of the run is bounded or the run hangs.
    trickling = faults.trickle(0.5) if fault == "trickle" else faults.trickle_headers(0.5)
    server.default_fault = trickling
    server.models_fault = trickling
    code, err, store = _grade_one_pair(server, tmp_path)
    assert code == 1, err
    assert server.counts[f"models:{fault}"] == 1
    assert server.counts[fault] == 1  # one attempt, then the pair failed
    with Store(store) as s:
        (judgment,) = list(stored_judgments(s))
    assert judgment.status == "failed" and judgment.grade is None
    assert judgment.error is not None and judgment.error.type == "APITimeoutError"


@pytest.mark.slow
def test_the_client_hangs_up_at_the_deadline(server: FakeServer, tmp_path: Path) -> None:
    # The deadline cancels the read and closes the connection: the server sees it go.
    server.default_fault = faults.trickle(0.5)
    code, err, _ = _grade_one_pair(server, tmp_path)
    assert code == 1, err
    for _ in range(100):  # the server notices at its next byte (0.5 s)
        if server.counts["hung_up"] >= 1:
            break
        threading.Event().wait(0.05)
    assert server.counts["hung_up"] >= 1


def _rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="needs /proc")
async def test_an_endless_body_is_cut_at_the_bound_and_memory_stays_flat(
    server: FakeServer,
) -> None:
    server.default_fault = faults.endless_body()
    calls: list[CallRecord] = []
    judge = LLMJudge(
        model="gpt-4o-mini",
        prompt=load_prompt("passage-v1"),
        base_url=server.base_url,
        api_key="sk-test-wire",
        policy=ONE,
        timeout=30.0,
        on_call=calls.append,
        max_reply_bytes=4 * MiB,
    )
    peak = before = _rss_bytes()
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.wait(0.01):
            peak = max(peak, _rss_bytes())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        judgment = await asyncio.wait_for(judge.judge(QUERY, DOC, key="sha256:k"), 60)
    finally:
        stop.set()
        sampler.join()
        await judge.aclose()
    assert judgment.status == "failed" and judgment.grade is None
    assert judgment.error is not None
    assert f"reply larger than {4 * MiB} bytes" in judgment.error.message
    assert [c.outcome for c in calls] == ["retry"]
    # A body followed into memory would pass the bound many times over; loosely bounded.
    assert peak - before < 64 * MiB
    assert server.counts["endless_bytes"] >= 4 * MiB


async def test_a_models_probe_with_an_endless_body_gives_nothing_and_grading_goes_on(
    server: FakeServer,
) -> None:
    server.models_fault = faults.endless_body()
    judge = LLMJudge(
        model="gpt-4o-mini",
        prompt=load_prompt("passage-v1"),
        base_url=server.base_url,
        api_key="sk-test-wire",
        policy=ONE,
        timeout=10.0,
        probe_server=True,
    )
    try:
        judgment = await asyncio.wait_for(judge.judge(QUERY, DOC, key="sha256:k"), 60)
    finally:
        await judge.aclose()
    assert judgment.status == "ok" and judgment.grade is not None
    assert judge.server_info is not None and judge.server_info.models == ()
    assert server.counts["models:endless_body"] == 1


@pytest.mark.slow
async def test_a_batch_download_that_trickles_is_cut(server: FakeServer) -> None:
    from starlette.requests import Request
    from starlette.responses import StreamingResponse

    async def trickled(request: Request) -> StreamingResponse:
        async def body() -> AsyncIterator[bytes]:
            for _ in range(10_000):
                await asyncio.sleep(0.5)
                yield b"x"

        return StreamingResponse(body(), media_type="application/octet-stream")

    server.add_route("/v1/files/{fid}/content", trickled, methods=["GET"])
    client = BatchClient(base_url=server.base_url, api_key="sk-test", timeout=2.0, policy=ONE)
    try:
        with pytest.raises(JudgeError, match="download failed: APITimeoutError"):
            await asyncio.wait_for(client.download("file-1"), 60)
    finally:
        await client.close()


async def test_the_chat_bound_is_set_by_the_environment(
    server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELGRADE_MAX_REPLY_BYTES", "200")  # below any valid completion
    judge = LLMJudge(
        model="gpt-4o-mini",
        prompt=load_prompt("passage-v1"),
        base_url=server.base_url,
        api_key="sk-test-wire",
        policy=ONE,
        timeout=10.0,
    )
    try:
        judgment = await asyncio.wait_for(judge.judge(QUERY, DOC, key="sha256:k"), 60)
    finally:
        await judge.aclose()
    assert judgment.status == "failed" and judgment.error is not None
    assert "reply larger than 200 bytes" in judgment.error.message
