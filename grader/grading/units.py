"""What a grading run queues and tracks: a judge call (`Unit`), a pair's state (`PairState`),
and the failed judgment of a call whose judge raised."""

from __future__ import annotations

from dataclasses import dataclass

from grader.grading.pairs import Pair
from grader.judges.base import Judge
from grader.models import Judgment, JudgmentError


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
    return Judgment(
        query_id=pair.query.query_id,
        doc_id=pair.doc.doc_id,
        status="failed",
        judge=unit.judge.judge_id,
        key=unit.key,
        error=JudgmentError(type=type(exc).__name__, message=str(exc) or repr(exc)),
    )
