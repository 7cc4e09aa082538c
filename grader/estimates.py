"""What requests will take before they are sent: tokens and cost, for --dry-run and --max-cost."""

from __future__ import annotations

from dataclasses import dataclass

from grader.judges.base import Judge
from grader.pairs import Pair


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
