"""Regrading through the Batch API against the fake /v1/files and /v1/batches: round trip,
partial failures, expiry, a crash at every step, overflow into a second batch, invalid output
lines, and a rerun that sends nothing."""

from __future__ import annotations

import json

import pytest

from grader.batch.adapter import LLMBatchJudge
from grader.batch.api.client import BatchClient
from grader.batch.api.state import BatchState
from grader.errors import JudgeError
from grader.store.store import Store
from tests.fake_batch import BatchPlan
from tests.helpers.batch_regrade import Setup, api_fixture, batch_servers_fixture, setup_fixture  # noqa: F401


async def test_round_trip_keeps_both_versions(setup: Setup) -> None:
    with Store(setup.db) as store:
        outcome = await setup.run(store)
        assert outcome.sent == 6 and len(outcome.job_ids) == 1
        (batch_id,) = setup.api.batches
        lines = setup.api.input_lines(batch_id)
        assert {line["custom_id"] for line in lines} == {c.new_key for c in outcome.candidates}
        assert all(line["url"] == "/v1/chat/completions" for line in lines)
        assert lines[0]["body"] == setup.judge.build_request(
            outcome.candidates[0].query, outcome.candidates[0].doc
        )
        assert setup.api.server.counts["requests"] == 0  # nothing went live
        assert store.count() == 12  # old six + new six
        assert {p.new.status for p in outcome.pairs if p.new} == {"ok"}
        for pair in outcome.pairs:
            assert pair.new is not None and pair.new.prompt == setup.prompt.ref()
            assert pair.old is not None and pair.old.prompt is not None
            assert pair.old.prompt.version == "1"
        diff = outcome.diff
        assert (diff.n, diff.failed, diff.pending, diff.batch_graded) == (6, 0, 0, 6)
        assert sum(map(sum, diff.transition)) == 6
        assert diff.cost is not None and diff.cost > 0
        assert diff.cost_without_batch == pytest.approx(2 * diff.cost)
        assert diff.changed == sum(
            1 for p in outcome.pairs if p.old and p.new and p.old.grade != p.new.grade
        )
        jobs = BatchState(store).jobs()
        assert [j.phase for j in jobs] == ["collected"]
        assert jobs[0].remote_status == "completed"


async def test_rerun_after_completion_sends_nothing(setup: Setup) -> None:
    with Store(setup.db) as store:
        first = await setup.run(store)
        uploads = setup.api.counts["upload"]
        second = await setup.run(store)
    assert second.sent == 0 and second.already_done == 6 and second.job_ids == []
    assert setup.api.counts["upload"] == uploads and len(setup.api.batches) == 1
    assert setup.api.server.counts["requests"] == 0
    assert second.diff.transition == first.diff.transition


async def test_partial_failures_and_invalid_lines_are_reasked_live(setup: Setup) -> None:
    setup.api.plan(
        BatchPlan(
            errors={1: (500, "server_error")},
            contents={2: json.dumps({"reason": "x", "grade": 7}), 3: "not json at all"},
        )
    )
    with Store(setup.db) as store:
        outcome = await setup.run(store)
        assert setup.api.server.counts["requests"] == 3  # the three bad lines, live
        assert outcome.collected is not None
        assert (outcome.collected.batch, outcome.collected.live) == (3, 3)
        assert outcome.collected.problems[outcome.candidates[2].new_key].type == "InvalidReply"
        assert outcome.diff.failed == 0 and outcome.diff.batch_graded == 3
        assert all(p.new is not None and p.new.status == "ok" for p in outcome.pairs)
        # only the lines graded by the batch were discounted; live re-asks paid full price
        by_batch = BatchState(store).keys_with_outcome("batch")
        assert len(by_batch) == 3
        batch_cost = sum(p.new.cost or 0 for p in outcome.pairs if p.new and p.new.key in by_batch)
        assert batch_cost > 0 and outcome.diff.cost is not None
        assert outcome.diff.cost_without_batch == pytest.approx(outcome.diff.cost + batch_cost)


@pytest.mark.slow
async def test_invalid_lines_without_live_retry_fail_never_grade(setup: Setup) -> None:
    setup.api.plan(
        BatchPlan(
            errors={1: (500, "server_error")},
            contents={2: json.dumps({"reason": "x", "grade": 7})},
        )
    )
    with Store(setup.db) as store:
        outcome = await setup.run(store, live_retry=False)
        assert setup.api.server.counts["requests"] == 0
        failed = {p.doc_id: p.new for p in outcome.pairs if p.new and p.new.status == "failed"}
        assert sorted(failed) == ["d1", "d2"]
        assert all(judgment.grade is None for judgment in failed.values())
        errors = {doc: j.error for doc, j in failed.items() if j.error is not None}
        assert sorted(errors) == ["d1", "d2"]  # every failed judgment says why
        assert errors["d1"].type == "Batch:server_error"
        assert "outside 0..3" in errors["d2"].message
        assert errors["d2"].raw_reply is not None
        assert outcome.diff.failed == 2
        assert sum(map(sum, outcome.diff.transition)) == 4
        # a rerun retries the failed ones (and only them)
        again = await setup.run(store)
        assert again.sent == 2 and again.diff.failed == 0


@pytest.mark.slow
async def test_expired_batch_rest_is_graded_live(setup: Setup) -> None:
    setup.api.plan(BatchPlan(polls_in_progress=2, expire_after=2))
    with Store(setup.db) as store:
        outcome = await setup.run(store)
        assert BatchState(store).jobs()[0].remote_status == "expired"
        assert outcome.collected is not None
        assert (outcome.collected.batch, outcome.collected.live) == (2, 4)
        assert setup.api.server.counts["requests"] == 4
        assert {p.type for p in outcome.collected.problems.values()} == {"Batch:batch_expired"}
        assert outcome.diff.batch_graded == 2 and outcome.diff.failed == 0


@pytest.mark.slow
async def test_overflow_goes_to_a_second_batch(setup: Setup) -> None:
    with Store(setup.db) as store:
        outcome = await setup.run(store, max_requests=4)
    assert len(outcome.job_ids) == 2 and len(setup.api.batches) == 2
    sizes = sorted(len(setup.api.input_lines(b)) for b in setup.api.batches)
    assert sizes == [2, 4]
    assert outcome.diff.batch_graded == 6


@pytest.mark.slow
async def test_no_wait_then_a_fresh_process_collects(setup: Setup) -> None:
    setup.api.plan(BatchPlan(polls_in_progress=3))
    with Store(setup.db) as store:
        outcome = await setup.run(store, wait=False)
        assert outcome.diff.pending == 6
        assert [j.phase for j in BatchState(store).jobs()] == ["submitted"]
        # a rerun meanwhile neither resubmits nor waits
        again = await setup.run(store, wait=False)
        assert again.sent == 0 and again.waiting_in_batches == 6
    assert setup.api.counts["create"] == 1
    with Store(setup.db) as store:  # "another process"
        runner = setup.runner(store)
        judge = LLMBatchJudge(setup.judge)
        summary = await runner.run(lambda config: judge)
        assert summary.batch == 6 and summary.jobs == 1
        assert store.count(status="ok") == 12
        assert [j.phase for j in runner.state.jobs()] == ["collected"]


@pytest.mark.slow
async def test_crash_between_upload_and_create_resumes(setup: Setup) -> None:
    setup.api.fail_on["create"].append(400)  # batches.create fails: the process stops there
    with Store(setup.db) as store, pytest.raises(JudgeError):
        await setup.run(store)
    assert setup.api.counts["upload"] == 1 and setup.api.counts["create"] == 0
    with Store(setup.db) as store:
        state = BatchState(store)
        assert [j.phase for j in state.jobs()] == ["uploaded"]
        judge = LLMBatchJudge(setup.judge)
        summary = await setup.runner(store).run(lambda config: judge)
        assert summary.batch == 6
    assert setup.api.counts["upload"] == 1 and setup.api.counts["create"] == 1


async def test_crash_after_create_before_recording_adopts_the_batch(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    def die(self: BatchState, job_id: int, info: object) -> None:
        raise KeyboardInterrupt  # the process is killed right after batches.create

    with Store(setup.db) as store:
        monkeypatch.setattr(BatchState, "set_remote", die)
        with pytest.raises(KeyboardInterrupt):
            await setup.run(store)
        monkeypatch.undo()
    assert setup.api.counts["create"] == 1
    with Store(setup.db) as store:
        judge = LLMBatchJudge(setup.judge)
        summary = await setup.runner(store).run(lambda config: judge)
        assert summary.batch == 6
    assert setup.api.counts["create"] == 1  # found by its input file, not created twice


@pytest.mark.slow
async def test_refused_upload_leaves_no_open_job(setup: Setup) -> None:
    setup.api.fail_on["upload"].append(404)  # e.g. a server with no /v1/files
    with Store(setup.db) as store:
        with pytest.raises(JudgeError, match="drop --batch to regrade concurrently"):
            await setup.run(store)
        assert BatchState(store).jobs() == []
        outcome = await setup.run(store)  # the keys are not held back
        assert outcome.sent == 6 and outcome.diff.batch_graded == 6


async def test_prepared_job_is_rebuilt_from_stored_texts(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def killed(self: BatchClient, content: bytes, *, filename: str) -> str:
        raise KeyboardInterrupt  # the process dies before the upload

    monkeypatch.setattr(BatchClient, "upload", killed)
    with Store(setup.db) as store, pytest.raises(KeyboardInterrupt):
        await setup.run(store)
    monkeypatch.undo()
    with Store(setup.db) as store:
        assert [j.phase for j in BatchState(store).jobs()] == ["prepared"]
        judge = LLMBatchJudge(setup.judge)
        summary = await setup.runner(store).run(lambda config: judge)
        assert summary.batch == 6
        assert store.count(status="ok") == 12


@pytest.mark.slow
async def test_failed_batch_is_graded_live(setup: Setup) -> None:
    setup.api.plan(BatchPlan(status="failed"))
    with Store(setup.db) as store:
        outcome = await setup.run(store)
    assert outcome.collected is not None and outcome.collected.live == 6
    assert {p.type for p in outcome.collected.problems.values()} == {"Batch:failed"}


@pytest.mark.slow
async def test_waiting_for_a_batch_that_never_ends_has_an_end(setup: Setup) -> None:
    """A server whose batch stays in progress is polled until `max_wait_s`, then the job is
    left open in the store (a later collect picks it up), never polled forever."""
    setup.api.plan(BatchPlan(polls_in_progress=10**6))
    now = [0.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:  # each poll takes a minute of the fake clock
        slept.append(seconds)
        now[0] += max(seconds, 60.0)

    with Store(setup.db) as store:
        outcome = await setup.run(store, wait=False)
        assert len(outcome.job_ids) == 1
        runner = setup.runner(store, max_wait_s=3600.0)
        batch_judge = LLMBatchJudge(setup.judge)
        summary = await runner.run(lambda config: batch_judge, sleep=sleep, clock=lambda: now[0])
        assert summary.waited_out and summary.jobs == 0
        assert 3600.0 <= now[0] <= 3660.0 and len(slept) <= 61
        assert [j.phase for j in BatchState(store).jobs()] == ["submitted"]


@pytest.mark.slow
async def test_polls_wait_longer_each_time_up_to_the_cap(setup: Setup) -> None:
    setup.api.plan(BatchPlan(polls_in_progress=10**6))
    now = [0.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    with Store(setup.db) as store:
        await setup.run(store, wait=False)
        options = {"poll_initial": 2.0, "poll_factor": 2.0, "poll_cap": 10.0, "max_wait_s": 40.0}
        runner = setup.runner(store, **options)
        batch_judge = LLMBatchJudge(setup.judge)
        await runner.run(lambda config: batch_judge, sleep=sleep, clock=lambda: now[0])
    assert slept == [2.0, 4.0, 8.0, 10.0, 10.0, 6.0]  # the last cut to the time left
