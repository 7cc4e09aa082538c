"""Running a regrade: select, skip what is done, grade the rest by batch or live, diff; or estimate
it without sending anything. The old judgments are never touched (the new version has its own
content keys); pairs with equal texts share one key, sent and paid once."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from grader.batch.api.jobs import BatchJudge, BatchRunner, CollectSummary, JudgeFor, Progress, Sleep
from grader.batch.api.state import BatchState
from grader.grading.budget import estimate_requests
from grader.grading.pairs import Pair
from grader.grading.pipeline import GradingReport, grade_pairs
from grader.grading.report import primary_fingerprint
from grader.judges.base import Judge
from grader.keys import content_key
from grader.regrade.diff import RegradeDiff, VersionPair, diff_versions
from grader.regrade.selection import (
    Candidate,
    Criterion,
    distinct_keys,
    select_candidates,
    version_pairs,
)
from grader.store.store import Store

if TYPE_CHECKING:
    from grader.judges.llm.judge import LLMJudge

J = TypeVar("J", bound=Judge)


@dataclass
class RegradeOutcome:
    """What a regrade selected, sent and found, and the diff (`requests`: contents sent)."""

    candidates: list[Candidate]
    pairs: list[VersionPair]
    diff: RegradeDiff
    sent: int = 0
    requests: int = 0
    already_done: int = 0
    waiting_in_batches: int = 0
    job_ids: list[int] = field(default_factory=list)
    collected: CollectSummary | None = None
    report: GradingReport | None = None


def _select(
    store: Store, judge: J | Sequence[J], criteria: Sequence[Criterion]
) -> tuple[list[J], list[Candidate]]:
    """The judges (several: an ensemble) and the pairs selected, under the new version's keys."""
    judges = list(judge) if isinstance(judge, Sequence) else [judge]
    if not judges:
        raise ValueError("at least one judge is needed")
    fingerprint = primary_fingerprint([j.fingerprint() for j in judges])
    return judges, select_candidates(store, criteria, fingerprint)


async def regrade(
    store: Store,
    judge: Judge | Sequence[Judge],
    criteria: Sequence[Criterion],
    *,
    runner: BatchRunner | None = None,
    batch_judge: BatchJudge | None = None,
    judge_for: JudgeFor | None = None,
    job_config: dict[str, Any] | None = None,
    wait: bool = True,
    batch_progress: Progress | None = None,
    batch_discount: float = 0.5,
    sleep: Sleep = asyncio.sleep,
    **grading: Any,
) -> RegradeOutcome:
    """Regrade the selected stored pairs with `judge` (several: an ensemble) live, by `grade_pairs(
    **grading)`, or through `runner` (`judge_for` rebuilds any open job's judge from its config)."""
    judges, candidates = _select(store, judge, criteria)
    if runner is not None and len(judges) > 1:
        raise ValueError("an ensemble regrades live: the batch path takes one judge")
    if runner is not None and (batch_judge is None or judge_for is None):
        raise ValueError("the batch path needs batch_judge and judge_for")
    # Each id pair under its new key, so a later regrade finds those another pair's request gave.
    store.put_pairs((c.new_key, c.query.query_id, c.doc.doc_id) for c in candidates)
    if runner is None:
        fields, batch_keys = await _live(store, candidates, judges, grading)
    else:
        assert batch_judge is not None and judge_for is not None
        # Keys waiting in open batch jobs are not sent again (nor counted by the dry run).
        todo, fields = work(store, candidates, runner.state.open_keys())
        if todo:  # every id pair is an item; pairs sharing a key are one request
            fields["job_ids"] = await runner.submit(
                batch_judge, [(c.query, c.doc, c.new_key) for c in todo], config=job_config or {}
            )
        fields["collected"] = await runner.run(
            judge_for, wait=wait, progress=batch_progress, sleep=sleep
        )
        batch_keys = runner.state.keys_with_outcome("batch")
    pairs = version_pairs(store, candidates)
    diff = diff_versions(pairs, batch_keys=batch_keys, batch_discount=batch_discount)
    return RegradeOutcome(candidates=candidates, pairs=pairs, diff=diff, **fields)


def work(
    store: Store, candidates: list[Candidate], waiting: set[str]
) -> tuple[list[Candidate], dict[str, Any]]:
    """The candidates to send (neither ok nor `waiting` in open batches) and the counts."""
    statuses = store.statuses(c.new_key for c in candidates)
    todo = [c for c in candidates if statuses.get(c.new_key) != "ok" and c.new_key not in waiting]
    in_batches = sum(1 for c in candidates if c.new_key in waiting)
    return todo, {
        "sent": len(todo),
        "requests": len(distinct_keys(todo)),
        "already_done": len(candidates) - len(todo) - in_batches,
        "waiting_in_batches": in_batches,
    }


async def _live(
    store: Store, candidates: list[Candidate], judges: list[Judge], grading: dict[str, Any]
) -> tuple[dict[str, Any], set[str]]:
    """Grade live what is not done nor waiting in open batches; also the keys batches graded."""
    with BatchState(store) as state:
        waiting = state.open_keys()
        batch_keys = state.keys_with_outcome("batch")
    todo, fields = work(store, candidates, waiting)
    if todo:
        pairs = [Pair(c.query, c.doc) for c in todo]
        fields["report"] = await grade_pairs(pairs, judges, store=store, **grading)
    return fields, batch_keys


@dataclass(frozen=True)
class RegradeEstimate:
    """A regrade's counts and its costs live and by batch, at the ceiling and as expected."""

    selected: int
    already_done: int
    in_batches: int
    pairs: int
    requests: int
    live_cost: float | None
    batch_cost: float | None
    expected_live_cost: float | None = None
    expected_batch_cost: float | None = None
    basis: tuple[str, ...] = ()


def estimate_regrade(
    store: Store, judge: LLMJudge | Sequence[LLMJudge], criteria: Sequence[Criterion]
) -> RegradeEstimate:
    """The estimate of regrading what `criteria` select with `judge` (several: an ensemble)."""
    judges, candidates = _select(store, judge, criteria)
    with BatchState(store) as state:
        waiting = state.open_keys()
    todo, counts = work(store, candidates, waiting)
    requests: list[tuple[Judge, Pair]] = []
    for member in judges:  # an ensemble member's answer already stored is reused
        fingerprint = member.fingerprint()
        keys = {c.new_key: content_key(fingerprint, c.query.text, c.doc.text) for c in todo}
        stored = store.statuses(keys.values()) if len(judges) > 1 else {}
        requests += [
            (member, Pair(c.query, c.doc))
            for c in distinct_keys(todo)
            if stored.get(keys[c.new_key]) != "ok"
        ]
    live, batch = (estimate_requests(requests, store, batch=b) for b in (False, True))
    return RegradeEstimate(
        selected=len(candidates),
        already_done=counts["already_done"],
        in_batches=counts["waiting_in_batches"],
        pairs=len(todo),
        requests=live.requests,
        live_cost=live.cost,
        batch_cost=batch.cost,
        expected_live_cost=live.expected_cost,
        expected_batch_cost=batch.expected_cost,
        basis=live.basis,
    )
