"""What a regrade would send and cost, live and by batch, without sending anything: one request per
content key; pairs already regraded or waiting in open batch jobs are not counted again."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from grader.batch.api.state import BatchState
from grader.grading.budget import expected_reply
from grader.judges.llm.judge import LLMJudge
from grader.keys import content_key
from grader.regrade.run import new_fingerprint, work
from grader.regrade.selection import Criterion, distinct_keys, select_candidates
from grader.store.store import Store


@dataclass(frozen=True)
class RegradeEstimate:
    """The counts and estimated costs of a regrade: `pairs` to grade, the `requests` sent for them
    (one per content and judge), costs live and by batch at the ceiling (every reply at max_tokens)
    and as expected (`basis`: whence each judge's expected reply); None when a model is unpriced."""

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
    judges = list(judge) if isinstance(judge, Sequence) else [judge]
    candidates = select_candidates(store, criteria, new_fingerprint(judges))
    with BatchState(store) as state:
        waiting = state.open_keys()
    todo, counts = work(store, candidates, waiting)
    requests = distinct_keys(todo)
    # live and batch, each at the ceiling and as expected: None once any request is unpriced
    costs: dict[tuple[bool, bool], float | None] = {
        (b, e): 0.0 for b in (False, True) for e in (False, True)
    }
    count = 0
    basis: list[str] = []
    for member in judges:
        fingerprint = member.fingerprint()
        keys = {c.new_key: content_key(fingerprint, c.query.text, c.doc.text) for c in requests}
        stored = store.statuses(keys.values()) if len(judges) > 1 else {}
        expected = expected_reply(member, store)
        tokens = None if expected is None else expected.tokens
        if expected is not None:
            basis.append(expected.basis)
        for c in requests:
            if stored.get(keys[c.new_key]) == "ok":
                continue  # an ensemble member's answer already stored is reused
            count += 1
            for (batch, is_expected), total in costs.items():
                one = member.estimate_cost(
                    c.query, c.doc, batch=batch, completion_tokens=tokens if is_expected else None
                )
                costs[batch, is_expected] = None if total is None or one is None else total + one
    return RegradeEstimate(
        selected=len(candidates),
        already_done=counts["already_done"],
        in_batches=counts["waiting_in_batches"],
        pairs=len(todo),
        requests=count,
        live_cost=costs[False, False],
        batch_cost=costs[True, False],
        expected_live_cost=costs[False, True],
        expected_batch_cost=costs[True, True],
        basis=tuple(basis),
    )
