"""The state machine of one grading run: planning from the store, the queue of judge calls,
delivering answers to pairs (shared content keys included), filling the run's report; driven by
`grader.grading.pipeline`."""

from __future__ import annotations

import asyncio
import collections
import functools
import time
from collections.abc import Sequence
from typing import Any

from grader.errors import JudgeError
from grader.grading.budget import all_priced, estimate_cost
from grader.grading.events import ProgressCallback, ProgressEvent
from grader.grading.leases import RunWaiting
from grader.grading.pairs import Pair, PairState, Unit
from grader.grading.report import GradingReport, OutputJudgments, StoredOutputs, for_pair
from grader.judges.base import Judge, check_key, failed
from grader.judges.ensemble import needs_verification
from grader.keys import ContentKeys
from grader.models import Judgment
from grader.redact import redact
from grader.store.busy import StoreFullError
from grader.store.judgment_rows import decode_key
from grader.store.reading import StoredRef, look_up
from grader.store.store import Store
from grader.store.writer import StoreWriter

HOLD_WAIT_S = 1200.0
"""How long a run waits for a key another live process holds (renewing its lease): longer than
any request with its retries takes, so a hung process never keeps a run waiting forever."""


def _mask(judgment: Judgment, secrets: Sequence[str]) -> Judgment:
    """The judgment with any secret masked in its free text (defence in depth)."""
    if not secrets:
        return judgment
    text = judgment.model_dump_json()
    if not any(s in text for s in secrets):
        return judgment
    return Judgment.model_validate_json(redact(text, secrets))


class GradingRun(RunWaiting):
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
        stream_final: bool = False,
    ) -> None:
        super().__init__(HOLD_WAIT_S)
        self.pairs = pairs
        self.judges = list(judges)
        self.store = store
        self.writer = writer
        self.verify_judge = verify_judge
        self.max_cost = max_cost
        self.secrets = tuple(s for s in secrets if s)
        self.fingerprints = [j.fingerprint() for j in self.judges]
        self.verify_fingerprint = verify_judge.fingerprint() if verify_judge else None
        self.key_makers = [ContentKeys(fp) for fp in self.fingerprints]
        self.verify_keys = (
            ContentKeys(self.verify_fingerprint) if self.verify_fingerprint is not None else None
        )
        self.dry_run = dry_run
        # Combined / verified output judgments, built, reused or queued for the store.
        self.composite = OutputJudgments(
            self.judges, self.fingerprints, self.verify_fingerprint, dry_run=dry_run
        )
        self.report = GradingReport(pairs=len(pairs))
        self.outputs: list[Judgment | None] = [None] * len(pairs)
        self.queue: collections.deque[Unit] = collections.deque()
        self.verified: dict[str, Judgment] = {}
        self.reserved = 0.0
        self.stopping = False
        self.fatal: BaseException | None = None
        self.on_progress: ProgressCallback | None = None
        # Pairs with equal texts share a key: asked once, its answer given to each of them.
        self.followers: dict[str, list[Unit]] = {}
        self.results: dict[str, Judgment] = {}
        self.final_from_store: set[int] = set()
        # Stored ok answers decided by one set-based lookup and left in the store, not loaded.
        self.streamed = (
            stream_final and store is not None and len(self.judges) == 1 and verify_judge is None
        )
        self.stored_rows: list[StoredRef] = []  # outputs left in the store
        self.from_store = bytearray(len(pairs))  # 1 where the pair's output is in stored_rows
        self.unlisted: list[tuple[str, str, str]] = []  # of stored_rows: id pairs to record

    # -- planning --------------------------------------------------------------------------

    def plan(self) -> list[PairState]:
        """Keys for every pair and judge, store lookup, and the queue of units to judge."""
        if self.streamed:
            return self._plan_streamed()
        states: list[PairState] = []
        for i, pair in enumerate(self.pairs):
            qtext, dtext = pair.query.text, pair.doc.text
            keys = [maker.key(qtext, dtext) for maker in self.key_makers]
            state = PairState(i, pair, keys, [None] * len(keys), len(keys))
            if self.verify_keys is not None:
                state.verify_key = self.verify_keys.key(qtext, dtext)
            state.ensemble_key, state.final_key = self.composite.keys(pair)
            states.append(state)
        wanted = [k for s in states for k in s.keys]
        wanted += [s.verify_key for s in states if s.verify_key]
        found = self.store.get_many(wanted) if self.store is not None else {}
        outputs = [k for s in states for k in (s.ensemble_key, s.final_key) if k]
        if self.store is not None and outputs:  # output judgments earlier runs stored
            self.composite.stored = self.store.get_many(outputs)
        statuses = [found[key].status for key in set(wanted) if key in found]
        self.report.stored_ok += statuses.count("ok")
        self.report.stored_failed += len(statuses) - statuses.count("ok")
        self.verified = {
            s.verify_key: found[s.verify_key]
            for s in states
            if s.verify_key in found and found[s.verify_key].status == "ok"
        }
        single = len(self.judges) == 1 and self.verify_judge is None
        for state in states:
            for slot, key in enumerate(state.keys):
                stored = found.get(key)
                if stored is not None and stored.status == "ok":
                    state.members[slot] = for_pair(stored, state.pair)
                    state.missing -= 1
                    self._count(self.judges[slot], paid=False)
                else:
                    self._enqueue(Unit(state, slot, self.judges[slot], key))
            if state.missing == 0:
                self._members_done(state)
                if single and state.primary is not None and state.primary.status == "ok":
                    self.final_from_store.add(state.index)
            self._store_group()
        return states

    def _plan_streamed(self) -> list[PairState]:
        """`plan` for one judge, equal to it: pairs stored ok are done without reading them."""
        assert self.store is not None
        maker, judge = self.key_makers[0], self.judges[0]
        digest = maker.digest
        rows = [
            (digest(p.query.text, p.doc.text), p.query.query_id, p.doc.doc_id) for p in self.pairs
        ]
        found = look_up(self.store.path, rows, listed=not self.dry_run)
        self.report.stored_ok = found.stored_ok
        self.report.stored_failed = found.stored_failed
        states: list[PairState] = []
        ok, rowids = found.ok, found.rowids
        stored_rows = self.stored_rows
        for i, (pair, row) in enumerate(zip(self.pairs, rows, strict=True)):
            if ok[i]:
                stored_rows.append((rowids[i], row[1], row[2], row[0]))
                continue
            key = decode_key(row[0])
            state = PairState(i, pair, [key], [None], 1)
            states.append(state)
            self._enqueue(Unit(state, 0, judge, key))
        self.from_store = found.ok
        done = len(stored_rows)
        self.report.cached += done
        if done:
            self._count(judge, paid=False, n=done)
        self.unlisted = [(decode_key(rows[i][0]), rows[i][1], rows[i][2]) for i in found.unlisted]
        return states

    def close_report(self) -> GradingReport:
        """The report with the run's outputs, held or left in the store (in pair order)."""
        report = self.report
        report.judgments = [j for j in self.outputs if j is not None]
        if self.streamed:
            assert self.store is not None
            pairs = zip(self.from_store, self.outputs, strict=True)
            order = bytearray(stored for stored, j in pairs if stored or j is not None)
            report.stored_outputs = StoredOutputs(str(self.store.path), self.stored_rows, order)
        report.pending = len(self.pairs) - report.done()
        return report

    def _store_group(self, answer: tuple[Judgment, dict[str, Any] | None] | None = None) -> None:
        """Queue `answer` and the output judgments it completed for one store commit."""
        items = ([answer] if answer is not None else []) + self.composite.take_group()
        if not items:
            return
        self.writer.add_group({j.key: (j, fp) for j, fp in items}.values())

    def _enqueue(self, unit: Unit) -> None:
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

    def _members_done(self, state: PairState) -> None:
        members = [m for m in state.members if m is not None]
        if len(self.judges) == 1:
            primary = members[0]
        else:
            assert state.ensemble_key is not None
            primary = self.composite.combined(members, state.ensemble_key, state.pair)
        state.primary = primary
        if self.verify_judge is not None and state.verify_key and needs_verification(primary):
            unit = Unit(state, -1, self.verify_judge, state.verify_key)
            cached = self.verified.get(state.verify_key)
            if cached is not None:
                self._deliver(unit, cached, paid=False)
            else:
                state.requested = True
                self._enqueue(unit)
            return
        self._finish(state, primary)

    def _finish(self, state: PairState, judgment: Judgment) -> None:
        self.outputs[state.index] = judgment
        if not state.requested:
            self.report.cached += 1
        elif judgment.status != "ok":
            self.report.failed += 1
        else:
            self.report.graded += 1

    def progress(self) -> ProgressEvent:
        """Where the run stands (for the caller's progress callback)."""
        report = self.report
        return ProgressEvent(
            total=report.pairs - report.cached,
            cached=report.cached,
            done=report.graded + report.failed,
            failed=report.failed,
            spend=report.cost,
            cost_known=not report.unpriced and self.all_priced,
        )

    @functools.cached_property
    def all_priced(self) -> bool:
        """Whether every judge has a price (asked once)."""
        return all_priced([*self.judges, self.verify_judge], self.pairs)

    # -- judging ---------------------------------------------------------------------------

    def _reserve(self, unit: Unit) -> float | None:
        """Reserve the unit's estimated cost; None when the budget does not allow it."""
        if self.max_cost is None:
            return 0.0
        cost = estimate_cost(unit.judge, unit.state.pair) or 0.0
        if self.report.cost + self.reserved + cost > self.max_cost:
            return None
        self.reserved += cost
        return cost

    async def worker(self) -> None:
        """Judge queued units until none is left or the run stops (a full disk stops it)."""
        try:
            await self._work()
        except StoreFullError as exc:
            self.fatal = self.fatal or exc
        if self.fatal is not None or self.writer.full is not None:
            self.stopping = True

    async def _work(self) -> None:
        while not self.stopping and self.writer.full is None:
            if not self.queue:
                if not self.waiting and not self.polling:
                    return
                await self._poll_waiting()
                continue
            unit = self.queue.popleft()
            reserved = self._reserve(unit)
            if reserved is None:
                self.queue.appendleft(unit)
                self.report.budget_reached = True
                self.stopping = True
                return
            try:
                if await self._claimed(unit):
                    await self._judge(unit)
            finally:
                self.reserved -= reserved

    def _answered(self, unit: Unit, judgment: Judgment, fp: dict[str, Any] | None) -> None:
        """Give the answer to the pairs waiting for its key; `fp` (of a paid one) stores it."""
        self.results[unit.key] = judgment
        for follower in [unit, *self.followers.pop(unit.key, [])]:
            self._deliver(follower, judgment, paid=fp is not None)
        self._store_group(None if fp is None else (judgment, fp))
        if self.on_progress is not None:
            self.on_progress(self.progress())

    async def _judge(self, unit: Unit) -> None:
        unit.state.requested = True
        self.report.requests += 1
        started = time.perf_counter()
        judge, key, (query, doc) = unit.judge, unit.key, unit.state.pair
        try:  # an answer under another key is a JudgeError (`check_key`)
            judgment = check_key(judge, await judge.judge(query, doc, key=key), key)
            if self.leases is not None:
                self.leases.answered(time.perf_counter() - started)
        except JudgeError as exc:
            self.fatal = exc
            self.stopping = True
            return
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:  # a judge bug must not lose the pair or invent a grade
            judgment = failed(judge, query, doc, key=key, error=exc)
        judgment = _mask(judgment, self.secrets)
        self.report.pay(judgment.usage, judgment.cost)
        fingerprint = self.verify_fingerprint if unit.slot < 0 else self.fingerprints[unit.slot]
        self._answered(unit, judgment, fingerprint)

    def _deliver(self, unit: Unit, judgment: Judgment, *, paid: bool = True) -> None:
        """Give a judge's answer to the pair of `unit`; `paid` when this run requested it."""
        state = unit.state
        if paid:
            state.requested = True
        self._count(unit.judge, paid=paid)
        answer = for_pair(judgment, state.pair)
        if unit.slot < 0:
            assert state.primary is not None
            final = self.composite.verified(state.primary, answer, state.final_key, state.pair)
            self._finish(state, final)
            return
        state.members[unit.slot] = answer
        state.missing -= 1
        if state.missing == 0:
            self._members_done(state)

    def _count(self, judge: Judge, *, paid: bool, n: int = 1) -> None:
        """Count `n` answers of a judge given to pairs: asked this run (`paid`) or reused."""
        counts = self.report.asked_by_judge if paid else self.report.stored_by_judge
        counts[judge.judge_id] = counts.get(judge.judge_id, 0) + n
