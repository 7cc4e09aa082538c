"""The grading pipeline: store lookup, bounded concurrent judging, immediate storage.

For each pair and each judge the content key is looked up in the store first: an ok judgment is
reused and costs nothing (a rerun with nothing changed sends zero requests); a stored failure is
retried. The rest is judged by `concurrency` worker tasks pulling from one queue (not one task
per pair), and every finished judgment goes to the store at once (small batches committed every
`flush_interval` seconds), so a killed process loses at most the calls in flight and a rerun
finishes the work with every pair graded exactly once.

- Ensembles and `--verify-low`: see `grader.ensemble` for how answers combine. Each judge's
  answer is stored under its own key, and so is the pair's OUTPUT judgment when it combines
  answers: the ensemble's combined judgment under the key of the members' fingerprints and the
  aggregation rule, the verified judgment under the key of the first judgment's fingerprint,
  the verifier's and the verification rule. A combined judgment is committed in the same
  transaction as the answer that completed it (so it never exists without its members); a
  rerun rebuilds it from the stored answers (no request) and stores it again only if it is
  missing or differs, so the output and the store agree. `grader.regrade` takes a pair's old
  version from these output judgments.
- `max_cost`: before each request its estimated cost (the judge's upper estimate) is reserved;
  a request that would take spent + reserved past the budget is not sent, so the run stops
  before spending more than the budget (retries of a request are part of its estimate only as
  far as the judge's estimate covers them). The budget is per run: cached pairs cost nothing.
- Ctrl-C (SIGINT): stop taking new work and let the calls in flight finish and be stored (for
  at most `grace_s` seconds); a second Ctrl-C abandons them at once. Abandoned calls store
  nothing, so the store is consistent either way; rerunning resumes.
- `dry_run`: look up the store and estimate, send nothing, write nothing.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import gc
import signal
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from grader.ensemble import (
    AGGREGATE_RULE,
    VERIFY_RULE,
    apply_verification,
    combine_members,
    needs_verification,
)
from grader.errors import InputError, JudgeError
from grader.estimates import Estimate, estimate_cost, estimate_request
from grader.judges.base import Judge
from grader.keys import content_key
from grader.models import Judgment, JudgmentError, Usage
from grader.pairs import Pair, PairSelection, pairs_to_grade
from grader.progress import GradingProgress
from grader.store import Store
from grader.store_writer import StoreWriter

__all__ = [
    "Estimate",
    "GradingReport",
    "StoreWriter",
    "grade_pairs",
    "pairs_to_grade",
    "run_grading",
]

FLUSH_INTERVAL_S = 0.1
GRACE_S = 15.0  # after Ctrl-C, how long calls in flight may take to finish


@dataclass
class GradingReport:
    """What a grading run did; `judgments` holds one output judgment per finished pair."""

    pairs: int = 0
    judgments: list[Judgment] = field(default_factory=list)
    cached: int = 0  # pairs answered wholly from the store
    graded: int = 0  # pairs that needed requests and ended ok
    failed: int = 0  # pairs that ended failed (a rerun retries them)
    pending: int = 0  # pairs not finished (interrupted, budget reached, fatal error)
    requests: int = 0  # judge calls made (each may be several HTTP attempts)
    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0  # USD of the priced judgments
    unpriced: int = 0  # judgments that used tokens but have no price (cost unknown, not 0)
    interrupted: bool = False
    budget_reached: bool = False
    stored_ok: int = 0  # judge answers found ok in the store before starting
    stored_failed: int = 0  # judge answers found failed in the store (to retry)
    estimate: Estimate | None = None  # dry run: what the remaining requests would take
    to_send: list[tuple[str, str, str]] = field(default_factory=list)  # dry run: (qid, did, judge)


@dataclass
class _Unit:
    state: _PairState
    slot: int  # member index, or -1 for the verifier
    judge: Judge
    key: str


@dataclass
class _PairState:
    index: int
    pair: Pair
    keys: list[str]
    members: list[Judgment | None]
    missing: int
    requested: bool = False
    primary: Judgment | None = None
    verify_key: str | None = None
    ensemble_key: str | None = None  # key of the combined judgment (ensembles only)
    final_key: str | None = None  # key of the verified judgment (--verify-low only)


def _mask(judgment: Judgment, secrets: Sequence[str]) -> Judgment:
    """The judgment with any secret masked in its free text (defence in depth)."""
    if not secrets:
        return judgment
    text = judgment.model_dump_json()
    if not any(s in text for s in secrets):
        return judgment
    for s in secrets:
        text = text.replace(s, "***")
    return Judgment.model_validate_json(text)


def _for_pair(judgment: Judgment, pair: Pair) -> Judgment:
    """`judgment` as the answer for `pair`: a stored answer may have been given to another pair
    with the same texts (same content key) under other ids."""
    if judgment.query_id == pair.query.query_id and judgment.doc_id == pair.doc.doc_id:
        return judgment
    return judgment.model_copy(update={"query_id": pair.query.query_id, "doc_id": pair.doc.doc_id})


def _same(stored: Judgment, rebuilt: Judgment) -> bool:
    """Whether a stored output judgment says what the rebuilt one says (times and ids aside)."""
    skip = {"created_at", "query_id", "doc_id"}
    return stored.model_dump(exclude=skip) == rebuilt.model_dump(exclude=skip)


def _failure(unit: _Unit, exc: BaseException) -> Judgment:
    pair = unit.state.pair
    return Judgment(
        query_id=pair.query.query_id,
        doc_id=pair.doc.doc_id,
        status="failed",
        judge=unit.judge.judge_id,
        key=unit.key,
        error=JudgmentError(type=type(exc).__name__, message=str(exc) or repr(exc)),
    )


class _Run:
    """The state of one `grade_pairs` call."""

    def __init__(
        self,
        pairs: Sequence[Pair],
        judges: Sequence[Judge],
        *,
        store: Store | None,
        writer: StoreWriter,
        verify_judge: Judge | None,
        max_cost: float | None,
        secrets: Sequence[str],
        dry_run: bool = False,
    ) -> None:
        self.pairs = pairs
        self.judges = list(judges)
        self.store = store
        self.writer = writer
        self.verify_judge = verify_judge
        self.max_cost = max_cost
        self.secrets = tuple(s for s in secrets if s)
        self.fingerprints = [j.fingerprint() for j in self.judges]
        self.verify_fingerprint = verify_judge.fingerprint() if verify_judge else None
        self.ensemble_fingerprint: dict[str, Any] = {
            "ensemble": self.fingerprints,
            "aggregate": AGGREGATE_RULE,
        }
        primary_fp = self.fingerprints[0] if len(self.judges) == 1 else self.ensemble_fingerprint
        self.final_fingerprint: dict[str, Any] | None = (
            None
            if self.verify_fingerprint is None
            else {"verified": primary_fp, "verifier": self.verify_fingerprint, "rule": VERIFY_RULE}
        )
        self.dry_run = dry_run
        # Output judgments stored by earlier runs (combined / verified), by key.
        self.composites: dict[str, Judgment] = {}
        # What one step (a judge's answer, or planning one pair) stores together.
        self.group: list[tuple[Judgment, dict[str, Any] | None]] = []
        self.ensemble_id = "ensemble(" + ",".join(j.judge_id for j in self.judges) + ")"
        self.report = GradingReport(pairs=len(pairs))
        self.outputs: list[Judgment | None] = [None] * len(pairs)
        self.queue: collections.deque[_Unit] = collections.deque()
        self.verified: dict[str, Judgment] = {}
        self.reserved = 0.0
        self.stopping = False
        self.fatal: BaseException | None = None
        self.progress: GradingProgress | None = None
        # Pairs with equal texts (e.g. duplicate passages under two ids) share a content key:
        # the key is requested once per run and its answer given to every pair that needs it.
        self.followers: dict[str, list[_Unit]] = {}
        self.results: dict[str, Judgment] = {}

    # -- planning --------------------------------------------------------------------------

    def plan(self) -> list[_PairState]:
        """Keys for every pair and judge, store lookup, and the queue of units to judge."""
        states: list[_PairState] = []
        for i, pair in enumerate(self.pairs):
            keys = [content_key(fp, pair.query.text, pair.doc.text) for fp in self.fingerprints]
            state = _PairState(i, pair, keys, [None] * len(keys), len(keys))
            if self.verify_fingerprint is not None:
                state.verify_key = content_key(
                    self.verify_fingerprint, pair.query.text, pair.doc.text
                )
            if len(self.judges) > 1:
                state.ensemble_key = content_key(
                    self.ensemble_fingerprint, pair.query.text, pair.doc.text
                )
            if self.final_fingerprint is not None:
                state.final_key = content_key(
                    self.final_fingerprint, pair.query.text, pair.doc.text
                )
            states.append(state)
        wanted = [k for s in states for k in s.keys]
        wanted += [s.verify_key for s in states if s.verify_key]
        found = self.store.get_many(wanted) if self.store is not None else {}
        outputs = [k for s in states for k in (s.ensemble_key, s.final_key) if k]
        if self.store is not None and outputs:
            self.composites = self.store.get_many(outputs)
        for key in set(wanted):
            stored = found.get(key)
            if stored is None:
                continue
            if stored.status == "ok":
                self.report.stored_ok += 1
            else:
                self.report.stored_failed += 1
        self.verified = {
            s.verify_key: found[s.verify_key]
            for s in states
            if s.verify_key in found and found[s.verify_key].status == "ok"
        }
        for state in states:
            for slot, key in enumerate(state.keys):
                stored = found.get(key)
                if stored is not None and stored.status == "ok":
                    state.members[slot] = _for_pair(stored, state.pair)
                    state.missing -= 1
                else:
                    self._enqueue(_Unit(state, slot, self.judges[slot], key))
            if state.missing == 0:
                self._members_done(state)
            self._store_group()
        return states

    def _store_group(self, answer: tuple[Judgment, dict[str, Any] | None] | None = None) -> None:
        """Queue a judge's `answer` and the output judgments it completed for the store, so one
        commit holds them all (the writer flushes what it holds first, so no size-triggered flush
        splits the group unless the group alone exceeds the writer's batch size)."""
        items = ([answer] if answer is not None else []) + self.group
        self.group = []
        if not items:
            return
        if len(items) > 1:
            self.writer.flush()
        for judgment, fingerprint in {j.key: (j, fp) for j, fp in items}.values():
            self.writer.add(judgment, fingerprint)

    def _output(self, judgment: Judgment, fingerprint: dict[str, Any], pair: Pair) -> Judgment:
        """A combined output judgment: the stored one when identical (a rerun changes nothing),
        else `judgment`, queued for the store."""
        stored = self.composites.get(judgment.key)
        if stored is not None and _same(stored, judgment):
            return _for_pair(stored, pair)
        if not self.dry_run:
            self.group.append((judgment, fingerprint))
        return judgment

    def _verified(self, state: _PairState, primary: Judgment, answer: Judgment) -> Judgment:
        assert self.final_fingerprint is not None
        final = apply_verification(primary, answer, key=state.final_key)
        return self._output(final, self.final_fingerprint, state.pair)

    def _enqueue(self, unit: _Unit) -> None:
        """Queue a unit, unless its key is already queued, in flight or answered this run."""
        done = self.results.get(unit.key)
        if done is not None:
            self._deliver(unit, done)
        elif unit.key in self.followers:
            self.followers[unit.key].append(unit)
        else:
            self.followers[unit.key] = []
            self.queue.append(unit)

    # -- combining -------------------------------------------------------------------------

    def _members_done(self, state: _PairState) -> None:
        members = [m for m in state.members if m is not None]
        if len(self.judges) == 1:
            primary = members[0]
        else:
            assert state.ensemble_key is not None
            combined = combine_members(members, key=state.ensemble_key, judge_id=self.ensemble_id)
            primary = self._output(combined, self.ensemble_fingerprint, state.pair)
        state.primary = primary
        if self.verify_judge is not None and state.verify_key and needs_verification(primary):
            cached = self.verified.get(state.verify_key)
            if cached is None:
                state.requested = True
                self._enqueue(_Unit(state, -1, self.verify_judge, state.verify_key))
                return
            primary = self._verified(state, primary, _for_pair(cached, state.pair))
        self._finish(state, primary)

    def _finish(self, state: _PairState, judgment: Judgment) -> None:
        self.outputs[state.index] = judgment
        failed = judgment.status != "ok"
        if not state.requested:
            self.report.cached += 1
        elif failed:
            self.report.failed += 1
        else:
            self.report.graded += 1
        if state.requested and self.progress is not None:
            self.progress.advance(failed=failed)

    # -- judging ---------------------------------------------------------------------------

    def _reserve(self, unit: _Unit) -> float | None:
        """Reserve the unit's estimated cost; None when the budget does not allow it."""
        if self.max_cost is None:
            return 0.0
        cost = estimate_cost(unit.judge, unit.state.pair) or 0.0
        if self.report.cost + self.reserved + cost > self.max_cost:
            return None
        self.reserved += cost
        return cost

    async def worker(self) -> None:
        while not self.stopping and self.queue:
            unit = self.queue.popleft()
            reserved = self._reserve(unit)
            if reserved is None:
                self.queue.appendleft(unit)
                self.report.budget_reached = True
                self.stopping = True
                return
            try:
                await self._judge(unit)
            finally:
                self.reserved -= reserved

    async def _judge(self, unit: _Unit) -> None:
        pair = unit.state.pair
        unit.state.requested = True
        self.report.requests += 1
        try:
            judgment = await unit.judge.judge(pair.query, pair.doc, key=unit.key)
        except JudgeError as exc:
            self.fatal = exc
            self.stopping = True
            return
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:  # a judge bug must not lose the pair or invent a grade
            judgment = _failure(unit, exc)
        judgment = _mask(judgment, self.secrets)
        self.report.usage = self.report.usage + judgment.usage
        self.report.cost += judgment.cost or 0.0
        if judgment.cost is None and (
            judgment.usage.prompt_tokens or judgment.usage.completion_tokens
        ):
            self.report.unpriced += 1
        if self.progress is not None:
            self.progress.add_spend(judgment.cost or 0.0)
        fingerprint = self.verify_fingerprint if unit.slot < 0 else self.fingerprints[unit.slot]
        self.results[unit.key] = judgment
        for follower in [unit, *self.followers.pop(unit.key, [])]:
            self._deliver(follower, judgment)
        self._store_group((judgment, fingerprint))

    def _deliver(self, unit: _Unit, judgment: Judgment) -> None:
        """Give a judge's answer to the pair of `unit` (ids rebound to that pair)."""
        state = unit.state
        state.requested = True
        answer = _for_pair(judgment, state.pair)
        if unit.slot < 0:
            assert state.primary is not None
            self._finish(state, self._verified(state, state.primary, answer))
            return
        state.members[unit.slot] = answer
        state.missing -= 1
        if state.missing == 0:
            self._members_done(state)

    def pending_units(self) -> list[_Unit]:
        return list(self.queue)


async def grade_pairs(
    pairs: Sequence[Pair],
    judges: Sequence[Judge],
    *,
    store: Store | None,
    writer: StoreWriter | None = None,
    verify_judge: Judge | None = None,
    concurrency: int = 8,
    max_cost: float | None = None,
    dry_run: bool = False,
    progress: bool | None = None,
    handle_sigint: bool = True,
    secrets: Sequence[str] = (),
    flush_interval: float = FLUSH_INTERVAL_S,
    grace_s: float = GRACE_S,
) -> GradingReport:
    """Grade `pairs` with `judges` (several = an ensemble), reusing the store (module docstring).

    Raises JudgeError when a judge reports a problem that dooms the whole run (bad credentials,
    unknown model), after storing everything finished so far.
    """
    if not judges:
        raise ValueError("at least one judge is needed")
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    writer = writer if writer is not None else StoreWriter(store)
    run = _Run(
        pairs,
        judges,
        store=store,
        writer=writer,
        verify_judge=verify_judge,
        max_cost=max_cost,
        secrets=secrets,
        dry_run=dry_run,
    )
    run.plan()
    if max_cost is not None:
        _check_priced(run)
    if dry_run:
        _fill_dry_run(run)
        return run.report
    if store is not None:
        store.put_texts(
            {p.query.query_id: p.query for p in pairs}.values(),
            {p.doc.doc_id: p.doc for p in pairs}.values(),
        )
    to_grade = len(pairs) - run.report.cached
    loop = asyncio.get_running_loop()
    workers: list[asyncio.Task[None]] = []
    presses = 0

    def abandon() -> None:
        for task in workers:
            task.cancel()

    def on_sigint() -> None:
        nonlocal presses
        presses += 1
        run.report.interrupted = True
        run.stopping = True
        if presses > 1:
            abandon()
        else:
            loop.call_later(grace_s, abandon)

    installed = False
    if handle_sigint and threading.current_thread() is threading.main_thread():
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, on_sigint)
            installed = True

    async def flusher() -> None:
        while True:
            await asyncio.sleep(flush_interval)
            writer.flush()

    flush_task = asyncio.create_task(flusher())
    # The pairs, texts and modules alive now live for the whole run: freezing them keeps the
    # cyclic GC from walking them again and again while thousands of replies are parsed
    # (6% less CPU per judgment in bench/grade_throughput.py). Undone when the run ends.
    gc.freeze()
    try:
        with GradingProgress(to_grade, cached=run.report.cached, enabled=progress) as bar:
            run.progress = bar
            workers = [asyncio.create_task(run.worker()) for _ in range(concurrency)]
            await asyncio.wait(workers)
    finally:
        gc.unfreeze()
        flush_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await flush_task
        if installed:
            loop.remove_signal_handler(signal.SIGINT)
        writer.flush()
    run.report.judgments = [j for j in run.outputs if j is not None]
    run.report.pending = len(pairs) - len(run.report.judgments)
    if run.fatal is not None:
        raise run.fatal
    return run.report


def _check_priced(run: _Run) -> None:
    """--max-cost can only be kept when every judge that will be asked has a price."""
    checked: set[int] = set()
    for unit in run.queue:
        if id(unit.judge) in checked:
            continue
        checked.add(id(unit.judge))
        if estimate_cost(unit.judge, unit.state.pair) is None:
            raise InputError(
                f"--max-cost needs a price for {unit.judge.judge_id}, and none is known",
                hint="add the model to a price table passed by --prices",
            )
    verifier = run.verify_judge
    if (
        verifier is not None
        and run.pairs
        and id(verifier) not in checked
        and estimate_cost(verifier, run.pairs[0]) is None
    ):
        raise InputError(
            f"--max-cost needs a price for {verifier.judge_id}, and none is known",
            hint="add the model to a price table passed by --prices",
        )


def _fill_dry_run(run: _Run) -> None:
    report = run.report
    prompt_tokens = completion_tokens = 0
    cost: float | None = 0.0
    for unit in run.pending_units():
        pair = unit.state.pair
        estimate = estimate_request(unit.judge, pair)
        prompt_tokens += estimate.prompt_tokens
        completion_tokens += estimate.completion_tokens
        cost = None if cost is None or estimate.cost is None else cost + estimate.cost
        report.to_send.append((pair.query.query_id, pair.doc.doc_id, unit.judge.judge_id))
    report.estimate = Estimate(len(report.to_send), prompt_tokens, completion_tokens, cost)
    report.judgments = [j for j in run.outputs if j is not None]
    report.pending = len(run.pairs) - len(report.judgments)


def run_grading(
    pairs: Sequence[Pair],
    judges: Sequence[Judge],
    **options: Any,
) -> GradingReport:
    """`grade_pairs` from synchronous code (the CLI); same arguments."""
    return asyncio.run(grade_pairs(pairs, judges, **options))


def selection_summary(selection: PairSelection) -> str:
    """One line about how the pairs were chosen (for the CLI's summary)."""
    parts = [f"{len(selection.pairs)} pairs"]
    if selection.duplicates:
        parts.append(f"{selection.duplicates} duplicates across runs merged")
    if selection.judged:
        parts.append(f"{selection.judged} already graded by people skipped")
    if selection.missing:
        parts.append(f"{selection.missing} with unknown ids skipped")
    return ", ".join(parts)


def iter_ok(judgments: Iterable[Judgment]) -> Iterable[Judgment]:
    """The ok judgments (what goes to qrels)."""
    return (j for j in judgments if j.status == "ok")
