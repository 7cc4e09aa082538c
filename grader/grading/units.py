"""What a grading run queues and tracks: a judge call (`Unit`) and a pair's state (`PairState`)."""

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

    async def ask(self) -> Judgment:
        """The judge's answer; a JudgeError when it comes under another key (see `check_key`)."""
        pair = self.state.pair
        answer = await self.judge.judge(pair.query, pair.doc, key=self.key)
        return check_key(self.judge, answer, self.key)

    def failure(self, exc: BaseException) -> Judgment:
        """The failed judgment of a call whose judge raised `exc` (never a grade)."""
        pair = self.state.pair
        return failed(self.judge, pair.query, pair.doc, key=self.key, error=exc)


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
        """(key, query_id, doc_id) of each content key of this pair."""
        qid, did = self.pair.query.query_id, self.pair.doc.doc_id
        keys = [*self.keys, self.verify_key, self.ensemble_key, self.final_key]
        return [(k, qid, did) for k in keys if k is not None]
