"""What a grading run queues and tracks: a judge call (`Unit`), a pair's state (`PairState`),
the call itself (`ask`: the answer is checked to come under the key it was asked with) and the
failed judgment of a call whose judge raised."""

from __future__ import annotations

from dataclasses import dataclass

from grader.grading.pairs import Pair
from grader.judges.base import Judge, check_key, failed
from grader.models import Judgment


@dataclass
class Unit:
    """One judge call of a pair: its judge and the content key it is asked under."""

    state: PairState
    slot: int  # member index, or -1 for the verifier
    judge: Judge
    key: str


@dataclass
class PairState:
    """A pair's answers so far, its keys, and its output once done."""

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

    def id_keys(self) -> list[tuple[str, str, str]]:
        """(key, query_id, doc_id) for each content key of this pair (for the store's list of
        the id pairs of each key)."""
        qid, did = self.pair.query.query_id, self.pair.doc.doc_id
        keys = [*self.keys, self.verify_key, self.ensemble_key, self.final_key]
        return [(k, qid, did) for k in keys if k is not None]


def failure(unit: Unit, exc: BaseException) -> Judgment:
    """The failed judgment of a call whose judge raised `exc` (never a grade)."""
    pair = unit.state.pair
    return failed(unit.judge, pair.query, pair.doc, key=unit.key, error=exc)


async def ask(unit: Unit) -> Judgment:
    """The judge's answer for the unit's pair; a JudgeError naming the judge when it answers
    under another key than the unit's (the pipeline owns the key: see `check_key`)."""
    pair = unit.state.pair
    answer = await unit.judge.judge(pair.query, pair.doc, key=unit.key)
    return check_key(unit.judge, answer, unit.key)
