"""What a real one-slot server showed (issue 24, point 7): it queues requests, so timeouts the
client caused lower the requests in flight; an invalid reply is not hidden by a later timeout;
plain JSON mode that never gives a valid reply moves the run to the final line; answered
attempts of a pair cut short are counted."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from grader.grading.pipeline import _count_abandoned
from grader.grading.report import GradingReport
from grader.judges.llm.server_settings import PLAIN_JSON_GIVE_UP
from grader.judges.llm.transport import InFlight
from grader.models import CallRecord
from tests.fake_flavours import QueueingServer
from tests.fakeserver import FakeServer, faults
from tests.helpers.llm_judges import make_judge, pairs


@pytest.mark.slow
async def test_a_server_that_queues_gets_fewer_requests_in_flight_not_a_stopped_run() -> None:
    with QueueingServer(latency_ms=250) as server:
        notices: list[str] = []
        judge = make_judge(server, timeout=1.0, on_notice=notices.append, max_attempts=6)
        results = await asyncio.gather(
            *(judge.judge(q, d, key=f"k{i}") for i, (q, d) in enumerate(pairs(8)))
        )
        await judge.aclose()
    assert [j.status for j in results] == ["ok"] * 8
    inflight = judge.pool.members[0].inflight
    assert inflight.limit is not None and inflight.limit < 8
    assert notices and "queues requests" in notices[0]


async def test_a_burst_of_timeouts_halves_the_requests_in_flight_once() -> None:
    now = [0.0]
    notices: list[str] = []
    inflight = InFlight(notices.append, clock=lambda: now[0])
    async with contextlib.AsyncExitStack() as stack:
        for _ in range(8):  # eight requests in flight, sent at 1
            await stack.enter_async_context(inflight)
    now[0] = 2.0
    inflight.answered()  # the server answered another: it queues the rest
    now[0] = 3.0
    lowered = [inflight.timed_out(1.0) for _ in range(8)]  # the eight time out together
    assert lowered == [True] + [False] * 7
    assert inflight.limit == 4 and len(notices) == 1
    now[0] = 5.0
    inflight.answered()
    now[0] = 6.0
    assert [inflight.timed_out(4.0) for _ in range(4)] == [True, False, False, False]
    assert inflight.limit == 2 and len(notices) == 2  # sent under the lowered bound: halved again


@pytest.mark.slow
async def test_a_timeout_after_an_invalid_reply_keeps_the_invalid_reply(
    fake_server: FakeServer,
) -> None:
    fake_server.enqueue(
        faults.content('{"reason": "x", "grade": 7}'), faults.slow(5.0), faults.slow(5.0)
    )
    judge = make_judge(fake_server, timeout=0.3, max_attempts=3)
    judgment = await judge.judge(*pairs(1)[0], key="k")
    assert judgment.status == "failed" and judgment.error is not None
    assert judgment.error.type == "InvalidReply"
    assert judgment.error.message.startswith("out_of_range")
    assert "timed out" in judgment.error.message
    assert judgment.error.raw_reply == '{"reason": "x", "grade": 7}'


@pytest.mark.slow
async def test_plain_json_mode_without_valid_replies_moves_the_run_to_the_final_line(
    fake_server: FakeServer,
) -> None:
    fake_server.default_fault = faults.content('{"verdict": "relevant"}')
    judge = make_judge(fake_server, output_mode="json_object")
    for i, (q, d) in enumerate(pairs(PLAIN_JSON_GIVE_UP)):
        failed = await judge.judge(q, d, key=f"k{i}")
        assert failed.status == "failed"
    assert judge.output_mode == "text"
    assert "json_object mode" in judge.server.switches[-1].reason
    fake_server.default_fault = None
    later = await judge.judge(*pairs(1)[0], key="later")
    assert later.status == "ok" and later.output_mode == "text"


@pytest.mark.slow
async def test_plain_json_mode_that_works_once_is_kept(fake_server: FakeServer) -> None:
    judge = make_judge(fake_server, output_mode="json_object")
    assert (await judge.judge(*pairs(1)[0], key="k")).status == "ok"
    fake_server.default_fault = faults.content('{"verdict": "relevant"}')
    for i, (q, d) in enumerate(pairs(PLAIN_JSON_GIVE_UP)):
        await judge.judge(q, d, key=f"k{i}")
    assert judge.output_mode == "json_object"


async def test_answered_attempts_of_a_pair_cut_short_are_counted(fake_server: FakeServer) -> None:
    fake_server.enqueue(faults.content('{"reason": "x", "grade": 9}'), faults.hang())
    invalid = asyncio.Event()

    def on_call(record: CallRecord) -> None:
        if record.outcome == "invalid":
            invalid.set()

    judge = make_judge(fake_server, on_call=on_call, timeout=30.0)
    task = asyncio.create_task(judge.judge(*pairs(1)[0], key="k"))
    await invalid.wait()
    await asyncio.sleep(0.05)  # the re-ask is in flight (the server hangs on it)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    report = GradingReport()
    _count_abandoned(report, [judge])
    assert report.usage.prompt_tokens > 0 and report.usage.completion_tokens > 0
    assert judge.take_abandoned()[0].prompt_tokens == 0  # taken once


async def test_a_vendor_field_the_server_ignores_moves_the_run_to_json_mode(
    fake_server: FakeServer,
) -> None:
    fake_server.default_fault = faults.content("Sure! The passage is relevant.")  # no JSON
    judge = make_judge(fake_server, output_mode="vllm_guided_json")
    for i, (q, d) in enumerate(pairs(PLAIN_JSON_GIVE_UP)):
        assert (await judge.judge(q, d, key=f"k{i}")).status == "failed"
    assert judge.output_mode == "json_object"
