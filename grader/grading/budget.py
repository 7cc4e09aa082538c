"""What requests will take before they are sent: tokens and cost, for --dry-run and --max-cost."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from grader.errors import InputError
from grader.grading.pairs import Pair
from grader.judges.base import Judge


@dataclass(frozen=True)
class Estimate:
    """Estimated size of the requests still to send (dry run, budget)."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = None


def estimate_request(judge: Judge, pair: Pair) -> Estimate:
    """The judge's estimate of one request (zero for judges that cost nothing, e.g. lexical).

    A judge may offer `estimate(query, doc)` (a Usage: prompt and completion tokens) and
    `estimate_cost(query, doc)` (USD, None when no price is known), as `LLMJudge` does.
    """
    estimate = getattr(judge, "estimate", None)
    if estimate is None:
        return Estimate(requests=1, cost=0.0)
    value = estimate(pair.query, pair.doc)
    return Estimate(
        requests=1,
        prompt_tokens=int(getattr(value, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(value, "completion_tokens", 0) or 0),
        cost=estimate_cost(judge, pair),
    )


def estimate_cost(judge: Judge, pair: Pair) -> float | None:
    """The judge's estimated USD for one request: 0 for free judges, None when unpriced."""
    cost_fn = getattr(judge, "estimate_cost", None)
    if cost_fn is not None:
        value: float | None = cost_fn(pair.query, pair.doc)
        return value
    estimate = getattr(judge, "estimate", None)
    if estimate is None:
        return 0.0
    cost = getattr(estimate(pair.query, pair.doc), "cost", None)
    return None if cost is None else float(cost)


def estimate_requests(requests: Iterable[tuple[Judge, Pair]]) -> Estimate:
    """The summed estimate of `requests` (judge, pair); cost None when any one is unpriced."""
    count = prompt_tokens = completion_tokens = 0
    cost: float | None = 0.0
    for judge, pair in requests:
        estimate = estimate_request(judge, pair)
        count += 1
        prompt_tokens += estimate.prompt_tokens
        completion_tokens += estimate.completion_tokens
        cost = None if cost is None or estimate.cost is None else cost + estimate.cost
    return Estimate(count, prompt_tokens, completion_tokens, cost)


def check_priced(
    requests: Iterable[tuple[Judge, Pair]], verifier: Judge | None, pairs: Sequence[Pair]
) -> None:
    """--max-cost can only be kept when every judge that will be asked has a price: the judge
    of each of `requests` (judge, pair) and the `verifier` (if any, priced on the first pair).

    Raises InputError naming the first judge without a price.
    """
    checked: set[int] = set()
    for judge, pair in requests:
        if id(judge) in checked:
            continue
        checked.add(id(judge))
        if estimate_cost(judge, pair) is None:
            raise InputError(
                f"--max-cost needs a price for {judge.judge_id}, and none is known",
                hint="add the model to a price table passed by --prices",
            )
    if (
        verifier is not None
        and pairs
        and id(verifier) not in checked
        and estimate_cost(verifier, pairs[0]) is None
    ):
        raise InputError(
            f"--max-cost needs a price for {verifier.judge_id}, and none is known",
            hint="add the model to a price table passed by --prices",
        )
