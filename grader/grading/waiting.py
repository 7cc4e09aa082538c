"""Sharing a store with other processes during a run: a key is leased before its request is
sent (`grader.grading.leases`); a key another live process holds waits for its answer, looked
at again every `poll_s`, and taken over once that process lets go (a mixin of
`grader.grading.run.GradingRun`)."""

from __future__ import annotations

import asyncio
import collections
import itertools
import time
from collections.abc import Iterator

from grader.grading.leases import Leases
from grader.grading.report import GradingReport
from grader.grading.units import Unit
from grader.models import Judgment
from grader.store.claims import ClaimBook, Outcome


class RunWaiting:
    """The leasing and waiting of `GradingRun` (see the module docstring)."""

    claims: ClaimBook | None
    leases: Leases | None
    queue: collections.deque[Unit]
    waiting: list[Unit]
    waiting_since: dict[str, float]  # key -> when a unit began waiting for it
    hold_wait_s: float  # (HOLD_WAIT_S)
    polling: bool
    poll_s: float
    stopping: bool
    report: GradingReport

    def _adopt(self, unit: Unit, judgment: Judgment) -> None:
        raise NotImplementedError  # GradingRun's

    async def _claimed(self, unit: Unit) -> bool:
        """Lease the unit's key before paying for it: False when another process holds it (the
        unit waits) or has stored its answer (the unit takes it)."""
        if self.claims is None:
            return True
        assert self.leases is not None
        claim = await self.leases.claim(unit.key, self._queued_keys)
        if claim.outcome is Outcome.CLAIMED:
            return True
        if claim.outcome is Outcome.STORED:
            assert claim.judgment is not None
            self._adopt(unit, claim.judgment)
        else:
            self.waiting_since.setdefault(unit.key, time.monotonic())
            self.waiting.append(unit)
        return False

    def _queued_keys(self, n: int) -> Iterator[str]:
        """The keys of the first `n` units of the queue."""
        return (unit.key for unit in itertools.islice(self.queue, n))

    async def _poll_waiting(self) -> None:
        """Wait a little, then look again at the keys other processes hold: take the answers
        they stored, queue the keys whose lease ended (their process died or let go)."""
        if self.polling or self.claims is None:
            await asyncio.sleep(self.poll_s)
            return
        self.polling = True
        try:
            await asyncio.sleep(self.poll_s)
            units, self.waiting = self.waiting, []
            if self.stopping or not units:
                self.waiting = units + self.waiting
                return
            claims = await asyncio.to_thread(self.claims.claim_many, [u.key for u in units])
            now = time.monotonic()
            for unit in units:
                claim = claims[unit.key]
                if claim.outcome is Outcome.STORED:
                    assert claim.judgment is not None
                    self._adopt(unit, claim.judgment)
                elif claim.outcome is Outcome.CLAIMED:
                    self.queue.append(unit)  # leased to this run now
                elif now - self.waiting_since.get(unit.key, now) >= self.hold_wait_s:
                    # Another live process has held it this long without an answer: stop
                    # waiting (the pair stays not done; a rerun takes its answer or its lease).
                    self.report.held_elsewhere += 1
                else:
                    self.waiting.append(unit)
        finally:
            self.polling = False
