"""Sharing a store with other processes during a run: each key is leased before its request is
sent, in rounds (a fast judge's next `AHEAD` keys ahead); a key another live process holds waits
for its answer, looked at every `POLL_S`, and is taken over once that process lets go."""

from __future__ import annotations

import asyncio
import collections
import functools
import itertools
import time
from collections.abc import Callable, Iterable, Iterator

from grader.grading.pairs import Unit
from grader.grading.report import GradingReport
from grader.models import Judgment
from grader.store.claims import POLL_S, Claim, ClaimBook, Outcome

FAST_JUDGE_S = 0.005
"""A judge that answered within this long (an offline one) gets the next keys leased ahead."""

AHEAD = 1024
"""Keys of the queue leased ahead for a fast judge (a fraction of a second of its answers)."""


class Leases:
    """Claims keys in rounds through `book` (module docstring); one per run, on its loop."""

    def __init__(self, book: ClaimBook) -> None:
        self.book = book
        self.fast = False  # the judge's last answer came within FAST_JUDGE_S
        self._asked: list[str] = []  # keys for the next round
        self._claiming: set[str] = set()  # keys in the next or the running round
        self._waiters: dict[str, asyncio.Future[Claim]] = {}  # keys a worker waits for
        self._ahead: dict[str, Claim] = {}  # claimed ahead, not asked for yet
        self._round: asyncio.Future[dict[str, Claim]] | None = None  # the running round
        self._settling = False

    def answered(self, seconds: float) -> None:
        """The judge answered in `seconds`: whether to lease ahead from now on."""
        self.fast = seconds < FAST_JUDGE_S

    async def claim(self, key: str, queued: Callable[[int], Iterable[str]]) -> Claim:
        """The claim of `key`; `queued(n)`: the run's next `n` keys (leased ahead if fast)."""
        known = self._ahead.pop(key, None)
        # Keys leased or being leased ahead: the first `held` of the queue.
        held = len(self._ahead) + len(self._claiming) - len(self._waiters)
        if known is None:
            self._ask(key)
        if self.fast and held < AHEAD // 2:
            for other in queued(held + AHEAD):
                self._ask(other)
        self._start_round()
        if known is not None:
            # Let the loop take a round's end and the writer's flushes between leased keys.
            await asyncio.sleep(0)
            return known
        future = self._waiters.get(key)
        if future is None:
            future = self._waiters[key] = asyncio.get_running_loop().create_future()
        return await future

    def _ask(self, key: str) -> None:
        """Claim `key` in the next round, unless it is claimed or being claimed."""
        if key not in self._claiming and key not in self._ahead:
            self._claiming.add(key)
            self._asked.append(key)

    def _start_round(self) -> None:
        """Claim the keys asked for on a worker thread, unless a round is running."""
        if self._round is not None or not self._asked or self._settling:
            return
        keys, self._asked = self._asked, []
        self._round = asyncio.get_running_loop().run_in_executor(None, self.book.claim_many, keys)
        self._round.add_done_callback(functools.partial(self._round_done, keys))

    def _round_done(self, keys: list[str], round_: asyncio.Future[dict[str, Claim]]) -> None:
        """Give each waiting worker its claim (or the round's error); keep the others'."""
        self._round = None
        self._claiming.difference_update(keys)
        error = round_.exception() if not round_.cancelled() else asyncio.CancelledError()
        for key in keys:
            future = self._waiters.pop(key, None)
            if error is None and (future is None or future.done()):
                self._ahead[key] = round_.result()[key]
            elif future is not None and not future.done():
                if error is None:
                    future.set_result(round_.result()[key])
                else:  # each worker waiting for one of these keys meets it
                    future.set_exception(error)
        self._start_round()

    async def settle(self) -> None:
        """Start no more rounds and wait for the running one (before the leases are let go)."""
        self._settling = True
        while self._round is not None:
            await asyncio.wait([self._round])
            await asyncio.sleep(0)  # its callback ran


class RunWaiting:
    """The leasing and waiting of `grader.grading.run.GradingRun` (a mixin)."""

    queue: collections.deque[Unit]
    stopping: bool
    report: GradingReport

    def __init__(self, hold_wait_s: float) -> None:
        self.claims: ClaimBook | None = None  # opened when the run starts sending
        self.leases: Leases | None = None
        self.waiting: list[Unit] = []
        self.waiting_since: dict[str, float] = {}  # key -> when a unit began waiting for it
        self.hold_wait_s = hold_wait_s
        self.polling = False

    _answered: Callable[[Unit, Judgment, None], None]  # GradingRun's

    async def _claimed(self, unit: Unit) -> bool:
        """Lease the unit's key: False when another process holds it or stored its answer."""
        if self.claims is None:
            return True
        assert self.leases is not None
        claim = await self.leases.claim(unit.key, self._queued_keys)
        return self._took(unit, claim, time.monotonic())

    def _took(self, unit: Unit, claim: Claim, now: float) -> bool:
        """Whether the run holds the key; else adopt its stored answer, wait, or give up."""
        if claim.outcome is Outcome.CLAIMED:
            return True
        if claim.outcome is Outcome.STORED:
            assert claim.judgment is not None  # another process paid for it: this run adopts it
            self.report.adopted += 1
            self._answered(unit, claim.judgment, None)
        elif now - self.waiting_since.setdefault(unit.key, now) >= self.hold_wait_s:
            # Held this long elsewhere, unanswered: the pair stays not done (a rerun may).
            self.report.held_elsewhere += 1
        else:
            self.waiting.append(unit)
        return False

    def _queued_keys(self, n: int) -> Iterator[str]:
        """The keys of the first `n` units of the queue."""
        return (unit.key for unit in itertools.islice(self.queue, n))

    async def _poll_waiting(self) -> None:
        """Look again at keys held elsewhere: take stored answers, queue released keys."""
        if self.polling or self.claims is None:
            await asyncio.sleep(POLL_S)
            return
        self.polling = True
        try:
            await asyncio.sleep(POLL_S)
            units, self.waiting = self.waiting, []
            if self.stopping or not units:
                self.waiting = units + self.waiting
                return
            claims = await asyncio.to_thread(self.claims.claim_many, [u.key for u in units])
            now = time.monotonic()
            for unit in units:
                if self._took(unit, claims[unit.key], now):
                    self.queue.append(unit)  # leased to this run now
        finally:
            self.polling = False
