"""Running a regrade: select, skip what is done, grade the rest by batch or concurrently, diff.

The old judgments are never touched: the new version has its own content keys. Every selected id
pair is in the outcome; pairs with equal texts share one key, sent (and paid) once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from grader import defaults
from grader.batch.api.jobs import BatchJudge, BatchRunner, CollectSummary, JudgeFor, Progress, Sleep
from grader.batch.api.state import BatchState
from grader.grading.events import ProgressCallback
from grader.grading.outputs import ensemble_fingerprint
from grader.grading.pairs import Pair
from grader.grading.pipeline import GradingReport, StoreWriter, grade_pairs
from grader.judges.base import Judge
from grader.regrade.diff import RegradeDiff, VersionPair, diff_versions
from grader.regrade.selection import (
    Candidate,
    Criterion,
    distinct_keys,
    record_pairs,
    select_candidates,
    to_grade,
    version_pairs,
)
from grader.store.store import Store


@dataclass
class RegradeOutcome:
    """What a regrade selected, sent and found, and the diff between versions. Counts are of
    id pairs, except `requests`: the distinct contents sent (pairs with equal texts share one)."""

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


def new_fingerprint(judges: Sequence[Judge]) -> dict[str, Any]:
    """The fingerprint the new version is keyed by: the judge's, or for several judges (an
    ensemble, as `grade --model A --model B` builds) that of their combined judgment."""
    if len(judges) == 1:
        return judges[0].fingerprint()
    return ensemble_fingerprint([j.fingerprint() for j in judges])


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
    concurrency: int = defaults.CONCURRENCY,
    progress: ProgressCallback | None = None,
    handle_sigint: bool = False,
    freeze_gc: bool = False,
    batch_progress: Progress | None = None,
    batch_discount: float = 0.5,
    sleep: Sleep | None = None,
    writer: StoreWriter | None = None,
) -> RegradeOutcome:
    """Regrade the selected stored pairs with `judge` (several: an ensemble, live only), through
    `runner` when given: `judge_for` rebuilds the judge of any open job from its `job_config`,
    so jobs of earlier runs are continued too."""
    judges = _judges(judge, batch=runner is not None)
    fingerprint = new_fingerprint(judges)
    candidates = select_candidates(store, criteria, fingerprint)
    record_pairs(store, candidates)
    if runner is not None:
        if batch_judge is None or judge_for is None:
            raise ValueError("the batch path needs batch_judge and judge_for")
        outcome_fields, batch_keys = await _by_batch(
            store,
            candidates,
            runner,
            batch_judge,
            judge_for,
            config=job_config or {},
            wait=wait,
            batch_progress=batch_progress,
            sleep=sleep,
        )
    else:
        outcome_fields, batch_keys = await _live(
            store,
            candidates,
            judges,
            concurrency=concurrency,
            progress=progress,
            handle_sigint=handle_sigint,
            freeze_gc=freeze_gc,
            writer=writer,
        )
    pairs = version_pairs(store, candidates)
    diff = diff_versions(pairs, batch_keys=batch_keys, batch_discount=batch_discount)
    return RegradeOutcome(candidates=candidates, pairs=pairs, diff=diff, **outcome_fields)


def _judges(judge: Judge | Sequence[Judge], *, batch: bool) -> list[Judge]:
    judges = list(judge) if isinstance(judge, Sequence) else [judge]
    if not judges:
        raise ValueError("at least one judge is needed")
    if batch and len(judges) > 1:
        raise ValueError("an ensemble regrades live: the batch path takes one judge")
    return judges


def _counts(candidates: list[Candidate], todo: list[Candidate], in_batches: int) -> dict[str, Any]:
    """The outcome's counts of pairs sent, distinct requests, already done and waiting."""
    return {
        "sent": len(todo),
        "requests": len(distinct_keys(todo)),
        "already_done": len(candidates) - len(todo) - in_batches,
        "waiting_in_batches": in_batches,
    }


async def _by_batch(
    store: Store,
    candidates: list[Candidate],
    runner: BatchRunner,
    batch_judge: BatchJudge,
    judge_for: JudgeFor,
    *,
    config: dict[str, Any],
    wait: bool,
    batch_progress: Progress | None,
    sleep: Sleep | None,
) -> tuple[dict[str, Any], set[str]]:
    """Submit the pairs not done nor waiting in open batches, run the batches (every open job,
    earlier runs' too); the outcome's fields and the keys graded by batch."""
    waiting = runner.state.open_keys()
    todo = to_grade(store, candidates, exclude=waiting)
    in_batches = sum(1 for c in candidates if c.new_key in waiting)
    job_ids: list[int] = []
    if todo:  # every id pair is an item; pairs sharing a key are one request
        job_ids = await runner.submit(
            batch_judge, [(c.query, c.doc, c.new_key) for c in todo], config=config
        )
    run_options: dict[str, Any] = {"wait": wait, "progress": batch_progress}
    if sleep is not None:
        run_options["sleep"] = sleep
    collected = await runner.run(judge_for, **run_options)
    fields = _counts(candidates, todo, in_batches)
    fields.update(job_ids=job_ids, collected=collected)
    return fields, runner.state.keys_with_outcome("batch")


async def _live(
    store: Store,
    candidates: list[Candidate],
    judges: list[Judge],
    *,
    concurrency: int,
    progress: ProgressCallback | None,
    handle_sigint: bool,
    freeze_gc: bool,
    writer: StoreWriter | None,
) -> tuple[dict[str, Any], set[str]]:
    """Grade the pairs not done nor waiting in open batches live; the outcome's fields and the
    keys graded by batch (by an earlier `batch collect`)."""
    # Keys waiting in open batch jobs are not sent again live (they would be paid twice,
    # and the dry run does not count them): they stay pending until the batch is collected.
    with BatchState(store) as state:
        waiting = state.open_keys()
        # Pairs an earlier batch (a `batch collect`) graded count as graded by batch.
        batch_keys = state.keys_with_outcome("batch")
    todo = to_grade(store, candidates, exclude=waiting)
    in_batches = sum(1 for c in candidates if c.new_key in waiting)
    report = None
    if todo:
        report = await grade_pairs(
            [Pair(c.query, c.doc) for c in todo],
            judges,
            store=store,
            concurrency=concurrency,
            progress=progress,
            handle_sigint=handle_sigint,
            freeze_gc=freeze_gc,
            writer=writer,
        )
    fields = _counts(candidates, todo, in_batches)
    fields["report"] = report
    return fields, batch_keys
