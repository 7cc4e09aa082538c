"""The grading pipeline with scripted in-process judges: store reuse, retries of failures,
ensembles, verification, budget and dry run. (End-to-end through the SDK and the fake server:
tests/test_grade_cli.py.)"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from grader.errors import JudgeError
from grader.grading.pairs import Pair
from grader.grading.pipeline import GradingReport, grade_pairs
from grader.judges.ensemble import lower_median
from grader.models import Doc, Judgment, JudgmentError, Query, Usage
from grader.store.store import Store

GradeFn = Callable[[Query, Doc], int | None]


class ScriptedJudge:
    """A judge whose grade comes from a function (None = a failed judgment); counts calls."""

    def __init__(
        self,
        name: str,
        grade: GradeFn,
        *,
        cost: float = 0.01,
        delay: float = 0.0,
        prompt_sha: str = "sha256:p1",
    ) -> None:
        self.name = name
        self.grade = grade
        self.cost = cost
        self.delay = delay
        self.prompt_sha = prompt_sha
        self.calls: list[tuple[str, str]] = []

    @property
    def judge_id(self) -> str:
        return f"scripted:{self.name}"

    def fingerprint(self) -> dict[str, Any]:
        return {"judge": self.judge_id, "model": self.name, "prompt_sha": self.prompt_sha}

    async def judge(self, query: Query, doc: Doc, *, key: str) -> Judgment:
        self.calls.append((query.query_id, doc.doc_id))
        if self.delay:
            await asyncio.sleep(self.delay)
        grade = self.grade(query, doc)
        common: dict[str, Any] = {
            "query_id": query.query_id,
            "doc_id": doc.doc_id,
            "judge": self.judge_id,
            "key": key,
            "attempts": 1,
            "usage": Usage(prompt_tokens=100, completion_tokens=10),
            "cost": self.cost,
        }
        if grade is None:
            return Judgment(
                status="failed", error=JudgmentError(type="InvalidReply", message="no"), **common
            )
        return Judgment(status="ok", grade=grade, reason=f"{self.name} says {grade}", **common)


class _Estimate:
    def __init__(self, cost: float) -> None:
        self.prompt_tokens = 100
        self.completion_tokens = 10
        self.cost = cost


class EstimatingJudge(ScriptedJudge):
    """A scripted judge that also estimates a request's tokens and cost, as LLMJudge does."""

    def estimate(self, query: Query, doc: Doc) -> _Estimate:
        return _Estimate(self.cost)


def make_pairs(n: int) -> list[Pair]:
    return [
        Pair(Query(query_id=f"q{i % 3}", text=f"query {i % 3}"), Doc(doc_id=f"d{i}", text=f"d{i}"))
        for i in range(n)
    ]


def by_doc(grades: Mapping[str, int | None]) -> GradeFn:
    return lambda q, d: grades.get(d.doc_id, 2)


async def grade(
    pairs: list[Pair], judges: list[ScriptedJudge], store: Store | None, **kw: Any
) -> GradingReport:
    return await grade_pairs(pairs, judges, store=store, **kw)


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


async def test_ensemble_records_members_lower_median_and_disagreement(tmp_path: Path) -> None:
    pairs = make_pairs(3)
    a = ScriptedJudge("a", by_doc({"d0": 3, "d1": 0, "d2": None}))
    b = ScriptedJudge("b", by_doc({"d0": 1, "d1": 1, "d2": None}))
    c = ScriptedJudge("c", by_doc({"d0": 2, "d1": None, "d2": None}))
    with Store(tmp_path / "s.db") as store:
        report = await grade(pairs, [a, b, c], store)
        out = {j.doc_id: j for j in report.judgments}
        assert out["d0"].grade == 2 and out["d0"].disagreement == 2.0
        assert out["d0"].judges == {"scripted:a": 3, "scripted:b": 1, "scripted:c": 2}
        # c failed on d1: the aggregate of 0 and 1 is the lower median, 0.
        assert out["d1"].grade == 0 and out["d1"].judges == {
            "scripted:a": 0,
            "scripted:b": 1,
            "scripted:c": None,
        }
        # One ok answer cannot show agreement: the disagreement is unknown, not 0.
        assert out["d1"].disagreement == 1.0
        assert out["d2"].status == "failed" and out["d2"].grade is None
        assert out["d2"].disagreement is None
        assert out["d2"].error is not None and out["d2"].error.type == "EnsembleFailed"
        # Every member's judgment under its own key, and each pair's combined judgment.
        assert store.count() == 12
        stored = store.get_many(j.key for j in report.judgments)
        assert [stored[j.key] for j in report.judgments] == report.judgments
        assert out["d0"].cost == pytest.approx(0.03)


async def test_ensemble_with_one_ok_member_has_unknown_disagreement(tmp_path: Path) -> None:
    pairs = make_pairs(2)
    a = ScriptedJudge("a", by_doc({"d0": 2, "d1": 1}))
    b = ScriptedJudge("b", by_doc({"d0": None, "d1": None}))
    c = ScriptedJudge("c", by_doc({"d0": None, "d1": 1}))
    with Store(tmp_path / "s.db") as store:
        report = await grade(pairs, [a, b, c], store)
    out = {j.doc_id: j for j in report.judgments}
    # 1 ok + 2 failed: the grade is the one answer, but nothing says the judges agree.
    assert out["d0"].grade == 2 and out["d0"].disagreement is None
    # 2 ok (agreeing) + 1 failed: the ok members agree.
    assert out["d1"].grade == 1 and out["d1"].disagreement == 0.0


def test_lower_median_never_invents_a_grade() -> None:
    assert lower_median([3]) == 3
    assert lower_median([0, 3]) == 0
    assert lower_median([1, 2, 3, 3]) == 2
    assert lower_median([3, 1, 2]) == 2


async def test_verify_low_sends_only_low_grades_and_keeps_both(tmp_path: Path) -> None:
    pairs = make_pairs(4)
    primary = ScriptedJudge("m", by_doc({"d0": 0, "d1": 1, "d2": 2, "d3": 3}))
    verifier = ScriptedJudge("v", by_doc({"d0": 2, "d1": None}))
    with Store(tmp_path / "s.db") as store:
        report = await grade(pairs, [primary], store, verify_judge=verifier)
        assert sorted(d for _, d in verifier.calls) == ["d0", "d1"]
        out = {j.doc_id: j for j in report.judgments}
        assert out["d0"].grade == 2  # the verifier answered: its grade is final
        assert out["d0"].verification is not None
        assert out["d0"].verification["primary"]["grade"] == 0
        assert out["d0"].verification["verifier"]["grade"] == 2
        assert out["d1"].grade == 1  # the verifier failed: the first grade stands
        assert out["d1"].verification is not None
        assert out["d1"].verification["verifier"]["status"] == "failed"
        assert out["d2"].verification is None and out["d2"].grade == 2
        again_p = ScriptedJudge("m", by_doc({}))
        again_v = ScriptedJudge("v", by_doc({}))
        report = await grade(pairs, [again_p], store, verify_judge=again_v)
        assert again_p.calls == [] and again_v.calls == [("q1", "d1")]  # failed one retried


async def test_output_judgments_are_stored_under_their_own_keys_and_reused(
    tmp_path: Path,
) -> None:
    pairs = make_pairs(4)
    grades = {"d0": 0, "d1": 1, "d2": 2, "d3": 3}
    a, b = ScriptedJudge("a", by_doc(grades)), ScriptedJudge("b", by_doc(grades))
    verifier = ScriptedJudge("v", by_doc({"d0": 3, "d1": 1}))
    with Store(tmp_path / "s.db") as store:
        report = await grade(pairs, [a, b], store, verify_judge=verifier)
        out = {j.doc_id: j for j in report.judgments}
        member_keys = {j.key for j in store.iter_judgments() if j.judges is None}
        assert all(j.key not in member_keys for j in report.judgments)
        verified = out["d0"]
        assert verified.grade == 3 and verified.verification is not None
        combined_key = verified.verification["primary"]["key"]
        assert combined_key != verified.key
        (combined,) = store.get_many([combined_key]).values()
        assert combined.judges is not None and combined.grade == 0
        assert combined.verification is None
        # Stored: 4 pairs x (a, b, combined) + 2 low pairs x (verifier, verified).
        assert store.count() == 16
        stored = store.get_many(j.key for j in report.judgments)
        assert [stored[j.key] for j in report.judgments] == report.judgments
        # A rerun sends nothing, writes nothing and gives the stored outputs back.
        before = {j.key: j.created_at for j in store.iter_judgments()}
        again = [ScriptedJudge(n, by_doc({})) for n in ("a", "b", "v")]
        rerun = await grade(pairs, again[:2], store, verify_judge=again[2])
        assert all(j.calls == [] for j in again)
        assert rerun.judgments == report.judgments
        assert {j.key: j.created_at for j in store.iter_judgments()} == before


async def test_a_missing_output_judgment_is_rebuilt_without_requests(tmp_path: Path) -> None:
    pairs = make_pairs(3)
    a, b = ScriptedJudge("a", by_doc({"d0": 0})), ScriptedJudge("b", by_doc({"d0": 2}))
    with Store(tmp_path / "s.db") as store:
        report = await grade(pairs, [a, b], store)
    # As a store from before output judgments were stored (or a lost commit) would look.
    with sqlite3.connect(tmp_path / "s.db") as conn:
        conn.execute("DELETE FROM judgments WHERE json_extract(payload, '$.judges') IS NOT NULL")
    with Store(tmp_path / "s.db") as store:
        assert store.count() == 6
        again = [ScriptedJudge("a", by_doc({})), ScriptedJudge("b", by_doc({}))]
        rerun = await grade(pairs, again, store)
        assert all(j.calls == [] for j in again)
        assert store.count() == 9
        stored = store.get_many(j.key for j in rerun.judgments)
        assert [stored[j.key].grade for j in rerun.judgments] == [j.grade for j in report.judgments]


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
