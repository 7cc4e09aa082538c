"""The grading pipeline with scripted in-process judges: store reuse, retries of failures,
budget, dry run, concurrency and errors. (Ensembles and verification:
tests/test_pipeline_ensembles.py; end to end through the SDK and the fake server:
tests/test_grade_cli.py.)"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from grader.errors import JudgeError
from grader.grading.pairs import Pair
from grader.models import Doc, Judgment, Query
from grader.store.store import Store
from tests.helpers.scripted_judge import EstimatingJudge, ScriptedJudge, by_doc, grade, make_pairs


async def test_rerun_sends_nothing_and_returns_the_same_judgments(tmp_path: Path) -> None:
    pairs = make_pairs(20)
    judge = ScriptedJudge("m", lambda q, d: int(d.doc_id[1:]) % 4)
    with Store(tmp_path / "s.db") as store:
        first = await grade(pairs, [judge], store, concurrency=4)
        assert (first.graded, first.cached, first.failed, len(judge.calls)) == (20, 0, 0, 20)
        second = await grade(pairs, [judge], store, concurrency=4)
        assert len(judge.calls) == 20
        assert (second.graded, second.cached, second.requests) == (0, 20, 0)
        assert second.judgments == first.judgments
        assert store.count() == 20
        assert set(store.queries()) == {"q0", "q1", "q2"} and len(store.docs()) == 20


async def test_changed_prompt_regrades_exactly_the_affected_judge(tmp_path: Path) -> None:
    pairs = make_pairs(6)
    with Store(tmp_path / "s.db") as store:
        await grade(pairs, [ScriptedJudge("m", by_doc({}))], store)
        edited = ScriptedJudge("m", by_doc({}), prompt_sha="sha256:p2")
        await grade(pairs, [edited], store)
        assert len(edited.calls) == 6
        # One extra pair: only it is sent for the edited prompt.
        more = [*pairs, *make_pairs(7)[6:]]
        again = ScriptedJudge("m", by_doc({}), prompt_sha="sha256:p2")
        report = await grade(more, [again], store)
        assert again.calls == [("q0", "d6")] and report.cached == 6
        assert store.count() == 13


async def test_failed_pairs_are_stored_and_retried_next_run(tmp_path: Path) -> None:
    pairs = make_pairs(5)
    flaky = ScriptedJudge("m", by_doc({"d1": None, "d3": None}))
    with Store(tmp_path / "s.db") as store:
        report = await grade(pairs, [flaky], store)
        assert (report.graded, report.failed) == (3, 2)
        assert {j.doc_id for j in report.judgments if j.status == "failed"} == {"d1", "d3"}
        assert store.count(status="failed") == 2
        fixed = ScriptedJudge("m", by_doc({}))
        report = await grade(pairs, [fixed], store)
        assert sorted(fixed.calls) == [("q0", "d3"), ("q1", "d1")]
        assert (report.graded, report.cached, report.failed) == (2, 3, 0)
        assert store.count(status="ok") == 5


async def test_dry_run_stores_no_output_judgment(tmp_path: Path) -> None:
    pairs = make_pairs(2)
    with Store(tmp_path / "s.db") as store:
        await grade(pairs, [ScriptedJudge("a", by_doc({}))], store)
        b = ScriptedJudge("b", by_doc({}))
        await grade(pairs, [ScriptedJudge("a", by_doc({})), b], store)
        assert store.count() == 6
        with sqlite3.connect(tmp_path / "s.db") as conn:
            conn.execute(
                "DELETE FROM judgments WHERE json_extract(payload, '$.judges') IS NOT NULL"
            )
        report = await grade(pairs, [ScriptedJudge("a", by_doc({})), b], store, dry_run=True)
        assert report.cached == 2 and store.count() == 4


async def test_max_cost_stops_before_overspending(tmp_path: Path) -> None:
    pairs = make_pairs(10)
    judge = EstimatingJudge("m", by_doc({}), cost=0.1)
    with Store(tmp_path / "s.db") as store:
        report = await grade(pairs, [judge], store, max_cost=0.35, concurrency=4)
        assert report.budget_reached
        assert report.cost <= 0.35 + 1e-9
        assert report.graded == 3 and report.pending == 7
        assert store.count() == 3


async def test_dry_run_sends_and_writes_nothing(tmp_path: Path) -> None:
    pairs = make_pairs(6)
    with Store(tmp_path / "s.db") as store:
        await grade(pairs[:2], [ScriptedJudge("m", by_doc({}))], store)
        judge = EstimatingJudge("m", by_doc({}), cost=0.5)
        report = await grade(pairs, [judge], store, dry_run=True)
        assert judge.calls == []
        assert report.stored_ok == 2
        assert report.estimate is not None
        assert report.estimate.requests == 4 and report.estimate.cost == pytest.approx(2.0)
        assert report.estimate.prompt_tokens == 400
        assert [d for _, d, _ in report.to_send] == ["d2", "d3", "d4", "d5"]
        assert store.count() == 2


async def test_concurrency_is_bounded(tmp_path: Path) -> None:
    active = peak = 0

    class Counting(ScriptedJudge):
        async def judge(self, query: Query, doc: Doc, *, key: str) -> Judgment:
            nonlocal active, peak
            active += 1
            peak = max(peak, active)
            try:
                return await super().judge(query, doc, key=key)
            finally:
                active -= 1

    judge = Counting("m", by_doc({}), delay=0.01)
    report = await grade(make_pairs(40), [judge], None, concurrency=5)
    assert report.graded == 40
    assert peak == 5


async def test_a_fatal_judge_error_stops_the_run_and_keeps_finished_work(tmp_path: Path) -> None:
    class Fatal(ScriptedJudge):
        async def judge(self, query: Query, doc: Doc, *, key: str) -> Judgment:
            if doc.doc_id == "d3":
                raise JudgeError("401 from the server: check OPENAI_API_KEY")
            return await super().judge(query, doc, key=key)

    with Store(tmp_path / "s.db") as store:
        with pytest.raises(JudgeError):
            await grade(make_pairs(10), [Fatal("m", by_doc({}))], store, concurrency=1)
        assert store.count() == 3


async def test_an_unexpected_exception_is_a_failure_never_a_grade(tmp_path: Path) -> None:
    class Buggy(ScriptedJudge):
        async def judge(self, query: Query, doc: Doc, *, key: str) -> Judgment:
            raise ValueError("boom")

    report = await grade(make_pairs(2), [Buggy("m", by_doc({}))], None)
    assert [j.status for j in report.judgments] == ["failed", "failed"]
    assert all(j.error and j.error.type == "ValueError" for j in report.judgments)


async def test_pairs_with_equal_texts_share_one_request_and_keep_their_ids(tmp_path: Path) -> None:
    query = Query(query_id="q1", text="same query")
    pairs = [
        Pair(query, Doc(doc_id="a", text="duplicate passage")),
        Pair(query, Doc(doc_id="b", text="duplicate passage")),
        Pair(Query(query_id="q2", text="same query"), Doc(doc_id="c", text="duplicate passage")),
    ]
    judge = ScriptedJudge("m", by_doc({}))
    with Store(tmp_path / "s.db") as store:
        first = await grade(pairs, [judge], store, concurrency=3)
        assert len(judge.calls) == 1
        assert [(j.query_id, j.doc_id) for j in first.judgments] == [
            ("q1", "a"),
            ("q1", "b"),
            ("q2", "c"),
        ]
        second = await grade(pairs, [judge], store)
        assert len(judge.calls) == 1 and second.cached == 3
        assert [(j.query_id, j.doc_id) for j in second.judgments] == [
            ("q1", "a"),
            ("q1", "b"),
            ("q2", "c"),
        ]


async def test_an_error_outside_the_judge_call_is_raised_never_a_short_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that dies (here: the store refuses a lease) must not leave a report that looks
    finished with pairs silently missing from it: the error reaches the caller."""
    from grader.store.claims import ClaimBook

    def broken(self: ClaimBook, keys: Any) -> Any:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(ClaimBook, "claim_many", broken)
    judge = ScriptedJudge("m", by_doc({}))
    with Store(tmp_path / "s.db") as store, pytest.raises(sqlite3.OperationalError, match="disk"):
        await grade(make_pairs(4), [judge], store, concurrency=2)
    assert judge.calls == []


async def test_a_busy_store_when_renewing_leases_loses_no_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Renewing the leases while another process holds the write lock fails for a while: the
    run goes on and stores every answer (the renewal is tried again next round)."""
    import grader.grading.pipeline as pipeline
    from grader.store.claims import ClaimBook

    def busy(self: ClaimBook) -> int:
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(pipeline, "RENEW_S", 0.01)
    monkeypatch.setattr(ClaimBook, "renew", busy)
    judge = ScriptedJudge("m", by_doc({}), delay=0.05)
    with Store(tmp_path / "s.db") as store:
        report = await grade(make_pairs(4), [judge], store, concurrency=2)
        assert [j.status for j in report.judgments] == ["ok"] * 4
        assert store.count(status="ok") == 4
