"""Slow is not dead, and the same failure to everything is given up on (issue 36, sections 1-2).

A one-slot server (one request served at a time, each for a fixed time; requests abandoned by the
client are served all the same and counted, as llama.cpp does) with concurrency 8 and a timeout
below 8 x the service time: every pair comes back ok, and the server completed exactly as many
answers as pairs were stored (no request paid twice). A server answering 500 to everything stops
`grade` with exit 2 naming the cause, after a small fraction of the requests the pairs would take.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.judges.llm.transport import InFlight, ServerHealth
from grader.store.store import Store
from tests.fakeserver import FakeServer, faults
from tests.grade_data import write_grade_files
from tests.helpers.judgments import stored_judgments

SERVICE_S = 0.3
TIMEOUT_S = 0.9  # 8 x 0.3 = 2.4 s of queue > 0.9 s


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as fake:
        yield fake


@pytest.mark.slow
def test_a_one_slot_server_is_slow_not_dead_and_no_answer_is_paid_twice(
    server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert 8 * SERVICE_S > TIMEOUT_S > SERVICE_S
    server.slots, server.service_s = 1, SERVICE_S
    files = write_grade_files(tmp_path, n_queries=4, depth=6)
    store = tmp_path / "s.db"
    args = files.args("--base-url", server.base_url, "--store", store, "--concurrency", "8")
    args += ["--timeout", str(TIMEOUT_S), "--quiet", "--model", "gpt-4o-mini"]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 0, err
    assert "not answering" not in err
    with Store(store) as s:
        stored = list(stored_judgments(s))
    assert len(stored) == files.n_pairs
    assert all(j.status == "ok" for j in stored)
    assert server.counts["completed"] == files.n_pairs  # every answer the server made is kept
    assert server.counts["requests"] == files.n_pairs


@pytest.mark.slow
def test_a_server_answering_500_to_everything_is_given_up_on(
    server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.default_fault = faults.server_error(500)
    files = write_grade_files(tmp_path, n_queries=10, depth=10)
    store = tmp_path / "s.db"
    args = files.args("--base-url", server.base_url, "--store", store, "--concurrency", "4")
    args += ["--max-attempts", "4", "--quiet", "--model", "gpt-4o-mini"]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "keeps failing" in err and "HTTP 500" in err
    assert server.counts["requests"] < files.n_pairs  # 100 pairs x 4 attempts otherwise
    with Store(store) as s:
        stored = list(stored_judgments(s))
    assert all(j.status == "failed" and j.grade is None for j in stored)
    assert len(stored) < files.n_pairs


@pytest.mark.slow
def test_an_endless_body_to_everything_is_given_up_on_naming_the_bound(
    server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server.default_fault = faults.endless_body()
    files = write_grade_files(tmp_path, n_queries=10, depth=10)
    args = files.args("--base-url", server.base_url, "--store", tmp_path / "s.db")
    args += ["--concurrency", "2", "--quiet", "--model", "gpt-4o-mini"]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2, err
    assert "keeps failing" in err and "reply larger than" in err
    assert server.counts["requests"] < files.n_pairs


async def test_a_deadline_follows_the_queue_and_the_oldest_request_always_has_one() -> None:
    now = [0.0]
    inflight = InFlight(clock=lambda: now[0], timeout=1.0)
    first = await inflight.__aenter__()
    second = await inflight.__aenter__()
    # Nothing answered yet: each request is cut at --timeout after it was sent.
    assert inflight.deadline(first, oldest=True) == 1.0
    assert inflight.deadline(second, oldest=False) == 1.0
    now[0] = 0.8
    third = await inflight.__aenter__()
    inflight.answered()  # the server answered another request at 0.8: it works through a queue
    assert inflight.deadline(second, oldest=False) is None  # waits while older ones are in flight
    assert inflight.deadline(third, oldest=False) == 1.8  # sent at the answer: no progress seen
    inflight.done(first)
    assert inflight.deadline(second, oldest=True) == 0.8 + 1.0  # from the last answer
    assert inflight.longest(third) == 3.0  # two timeouts of its own, one for the one before it


def test_the_same_failure_stops_only_across_pairs_and_a_good_answer_resets_it() -> None:
    health = ServerHealth(threshold=4)
    assert not any(health.same_failure("HTTP 500", "one pair", "boom") for _ in range(10))
    health.answered(ok=True)
    said = [health.same_failure("HTTP 500", f"pair {i}", "boom") for i in range(4)]
    assert said == [False, False, False, True] and health.failing == "HTTP 500: boom"
    other = ServerHealth(threshold=4)
    for i in range(3):
        other.same_failure("HTTP 500", f"pair {i}", "boom")
    assert not other.same_failure("HTTP 502", "pair 3", "bad gateway")  # another cause
    other.answered(ok=True)
    assert not other.same_failure("HTTP 502", "pair 4", "bad gateway")


def test_the_same_failure_must_last_too() -> None:
    now = [0.0]
    health = ServerHealth(threshold=4, same_for_s=10.0, clock=lambda: now[0])
    assert not any(health.same_failure("HTTP 503", f"pair {i}", "overloaded") for i in range(20))
    now[0] = 9.0  # a burst of 503s shorter than 10 s is waited out
    assert not health.same_failure("HTTP 503", "pair 20", "overloaded")
    now[0] = 10.0
    assert health.same_failure("HTTP 503", "pair 21", "overloaded")
