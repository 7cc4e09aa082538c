"""A run's leases are taken in rounds: the keys its workers ask for meanwhile share one
transaction, keys are leased ahead only for a judge that answers fast, and a round's error
reaches every worker waiting on it."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from grader.grading.leases import AHEAD, FAST_JUDGE_S, Leases
from grader.store.claims import Claim, ClaimBook, Outcome
from grader.store.store import Store
from tests.helpers.store_lock import leased


class CountingBook(ClaimBook):
    """A ClaimBook that records each round of keys it claims."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.rounds: list[list[str]] = []
        self.gate = threading.Event()
        self.gate.set()

    def claim_many(self, keys: object) -> dict[str, Claim]:
        assert isinstance(keys, list)
        self.gate.wait(10)
        self.rounds.append(list(keys))
        return super().claim_many(keys)


def nothing_queued(n: int) -> list[str]:
    return []


@pytest.fixture
def book(tmp_path: Path) -> CountingBook:
    Store(tmp_path / "s.db").close()
    return CountingBook(tmp_path / "s.db")


async def test_keys_asked_for_meanwhile_are_claimed_in_one_round(book: CountingBook) -> None:
    leases = Leases(book)
    claims = await asyncio.gather(*(leases.claim(f"k{i}", nothing_queued) for i in range(8)))
    assert [c.outcome for c in claims] == [Outcome.CLAIMED] * 8
    # The first asks at once; the others, asking while it runs, share the next round.
    assert book.rounds == [["k0"], [f"k{i}" for i in range(1, 8)]]
    assert sorted(leased(book)) == sorted(f"k{i}" for i in range(8))
    book.close()


async def test_keys_are_leased_ahead_only_after_a_fast_answer(book: CountingBook) -> None:
    keys = [f"k{i}" for i in range(3 * AHEAD)]
    queue = list(keys)

    def queued(n: int) -> list[str]:
        return queue[:n]

    leases = Leases(book)
    await leases.claim("a", queued)
    assert book.rounds == [["a"]]  # no answer yet: nothing ahead
    leases.answered(FAST_JUDGE_S * 10)
    await leases.claim("b", queued)
    assert book.rounds[-1] == ["b"]
    leases.answered(FAST_JUDGE_S / 10)
    await leases.claim("c", queued)
    assert book.rounds[-1] == ["c", *keys[:AHEAD]]
    for _ in range(AHEAD // 2):  # leased ahead: no round until half of them are used
        assert (await leases.claim(queue.pop(0), queued)).outcome is Outcome.CLAIMED
    assert len(book.rounds) == 3
    assert (await leases.claim(queue.pop(0), queued)).outcome is Outcome.CLAIMED
    await leases.settle()
    assert book.rounds[-1] == keys[AHEAD : 2 * AHEAD]  # topped up, none twice
    book.close()


async def test_a_key_in_a_running_round_waits_for_that_round(book: CountingBook) -> None:
    leases = Leases(book)
    leases.answered(0.0)
    book.gate.clear()
    first = asyncio.create_task(leases.claim("a", lambda n: ["b"][:n]))
    await asyncio.sleep(0.05)
    second = asyncio.create_task(leases.claim("b", nothing_queued))
    await asyncio.sleep(0.05)
    book.gate.set()
    assert (await first).outcome is Outcome.CLAIMED
    assert (await second).outcome is Outcome.CLAIMED
    assert book.rounds == [["a", "b"]]  # b was not claimed twice
    book.close()


async def test_a_round_that_fails_reaches_each_worker_waiting_on_it(
    book: CountingBook, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(keys: object) -> dict[str, Claim]:
        raise OSError("disk I/O error")

    monkeypatch.setattr(book, "claim_many", broken)
    leases = Leases(book)
    results = await asyncio.gather(
        leases.claim("a", nothing_queued), leases.claim("b", nothing_queued), return_exceptions=True
    )
    assert [type(r) for r in results] == [OSError, OSError]
    monkeypatch.undo()
    assert (await leases.claim("a", nothing_queued)).outcome is Outcome.CLAIMED  # asked again
    book.close()
