"""What requests will take before they are sent: tokens and cost, for --dry-run and --max-cost."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from grader.errors import InputError
from grader.grading.pairs import Pair
from grader.judges.base import Judge
from grader.prompts import PromptSpec
from grader.spelling import option
from grader.store.store import Store


@dataclass(frozen=True)
class Estimate:
    """The requests still to send: tokens and cost at the ceiling (--max-cost's) and expected."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None
    expected_completion_tokens: int = 0
    expected_cost: float | None = None
    basis: tuple[str, ...] = ()


def expected_reply(judge: Judge, store: Store | None) -> tuple[int, str] | None:
    """One reply's expected completion tokens and why: the median stored for its prompt, else a
    guess."""
    guess = getattr(judge, "expected_completion_tokens", None)
    prompt = getattr(judge, "prompt", None)
    if guess is None or not isinstance(prompt, PromptSpec):
        return None
    stored = []
    if store is not None:
        stored = store.completion_tokens(judge=judge.judge_id, prompt_sha=prompt.sha256)
    if stored:
        tokens = math.ceil(statistics.median(stored))
        return (
            tokens,
            f"{judge.judge_id}: {tokens:,} tokens per reply, the median of {len(stored):,} stored "
            f"replies of {prompt.id}",
        )
    tokens = int(guess())
    return (
        tokens,
        f"{judge.judge_id}: about {tokens:,} tokens per reply, a grade and a short reason as the "
        f"reply schema of {prompt.id} asks (no stored replies of it yet)",
    )


def estimate_cost(judge: Judge, pair: Pair, **reply: Any) -> float | None:
    """The judge's estimated USD for one request (`reply`: its `completion_tokens`, `batch`): 0
    for a judge without `estimate_cost` (free), None when unpriced."""
    cost_fn = getattr(judge, "estimate_cost", None)
    return 0.0 if cost_fn is None else cost_fn(pair.query, pair.doc, **reply)


def all_priced(judges: Sequence[Judge | None], pairs: Sequence[Pair]) -> bool:
    """Whether every judge given has a price (asked on the first pair)."""
    for judge in judges:
        if judge is None or not pairs:
            continue
        try:
            if estimate_cost(judge, pairs[0]) is None:
                return False
        except Exception:  # the judge's own error comes with the pair's judgment
            continue
    return True


def estimate_requests(
    requests: Iterable[tuple[Judge, Pair]], store: Store | None = None, *, batch: bool = False
) -> Estimate:
    """The summed estimate of `requests` (judge, pair), by the Batch API when `batch`; a cost
    is None when one is unpriced."""
    by_batch: dict[str, Any] = {"batch": True} if batch else {}
    count = prompt_tokens = completion_tokens = expected_tokens = 0
    cost: float | None = 0.0
    expected_cost: float | None = 0.0
    expected: dict[int, tuple[int, str] | None] = {}
    for judge, pair in requests:
        count += 1
        one_cost = estimate_cost(judge, pair, **by_batch)
        estimate = getattr(judge, "estimate", None)  # none: a judge that costs nothing
        value = estimate(pair.query, pair.doc) if estimate is not None else None
        prompt_tokens += int(getattr(value, "prompt_tokens", 0) or 0)
        one_tokens = int(getattr(value, "completion_tokens", 0) or 0)
        completion_tokens += one_tokens
        cost = None if cost is None or one_cost is None else cost + one_cost
        if id(judge) not in expected:
            expected[id(judge)] = expected_reply(judge, store)
        reply = expected[id(judge)]
        if reply is not None:  # a judge that sends requests: its expected reply and cost
            one_tokens = reply[0]
            one_cost = estimate_cost(judge, pair, completion_tokens=one_tokens, **by_batch)
        expected_tokens += one_tokens
        if expected_cost is not None:
            expected_cost = None if one_cost is None else expected_cost + one_cost
    basis = tuple(r[1] for r in expected.values() if r is not None)
    return Estimate(
        count, prompt_tokens, completion_tokens, cost, expected_tokens, expected_cost, basis
    )


def check_priced(
    requests: Iterable[tuple[Judge, Pair]], verifier: Judge | None, pairs: Sequence[Pair]
) -> None:
    """InputError naming the first judge asked (or `verifier`) without a price."""
    first: dict[int, tuple[Judge, Pair]] = {}
    for judge, pair in requests:
        first.setdefault(id(judge), (judge, pair))
    if verifier is not None and pairs:
        first.setdefault(id(verifier), (verifier, pairs[0]))
    for judge, pair in first.values():
        if estimate_cost(judge, pair) is None:
            raise InputError(
                f"{option('--max-cost', 'max_cost')} needs a price for {judge.judge_id}, and none "
                "is known",
                hint=f"add the model to a price table passed by {option('--prices', 'prices=')}",
            )
