"""Scripted in-process judges for the grading pipeline tests: grades come from a function, calls
are counted."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from grader.grading.pairs import Pair
from grader.grading.pipeline import GradingReport, grade_pairs
from grader.models import Doc, Judgment, JudgmentError, Query, Usage
from grader.store.store import Store

GradeFn = Callable[[Query, Doc], int | None]


class ScriptedJudge:
    """A judge whose grade comes from a function (None = a failed judgment); counts calls."""

    def __init__(
        self,
        name: str,
        grade: GradeFn,
        *,
        cost: float = 0.01,
        delay: float = 0.0,
        prompt_sha: str = "sha256:p1",
    ) -> None:
        self.name = name
        self.grade = grade
        self.cost = cost
        self.delay = delay
        self.prompt_sha = prompt_sha
        self.calls: list[tuple[str, str]] = []

    @property
    def judge_id(self) -> str:
        return f"scripted:{self.name}"

    def fingerprint(self) -> dict[str, Any]:
        return {"judge": self.judge_id, "model": self.name, "prompt_sha": self.prompt_sha}

    async def judge(self, query: Query, doc: Doc, *, key: str) -> Judgment:
        self.calls.append((query.query_id, doc.doc_id))
        if self.delay:
            await asyncio.sleep(self.delay)
        grade = self.grade(query, doc)
        common: dict[str, Any] = {
            "query_id": query.query_id,
            "doc_id": doc.doc_id,
            "judge": self.judge_id,
            "key": key,
            "attempts": 1,
            "usage": Usage(prompt_tokens=100, completion_tokens=10),
            "cost": self.cost,
        }
        if grade is None:
            return Judgment(
                status="failed", error=JudgmentError(type="InvalidReply", message="no"), **common
            )
        return Judgment(status="ok", grade=grade, reason=f"{self.name} says {grade}", **common)


class Estimate:
    """The tokens and cost a request is expected to take."""

    def __init__(self, cost: float) -> None:
        self.prompt_tokens = 100
        self.completion_tokens = 10
        self.cost = cost


class EstimatingJudge(ScriptedJudge):
    """A scripted judge that also estimates a request's tokens and cost, as LLMJudge does."""

    def estimate(self, query: Query, doc: Doc) -> Estimate:
        return Estimate(self.cost)

    def estimate_cost(self, query: Query, doc: Doc, **reply: Any) -> float | None:
        return self.cost


def make_pairs(n: int) -> list[Pair]:
    """n pairs over three queries, doc i's text its id."""
    return [
        Pair(Query(query_id=f"q{i % 3}", text=f"query {i % 3}"), Doc(doc_id=f"d{i}", text=f"d{i}"))
        for i in range(n)
    ]


def by_doc(grades: Mapping[str, int | None]) -> GradeFn:
    """Grades by doc id (None: a failed judgment); 2 for any doc not named."""
    return lambda q, d: grades.get(d.doc_id, 2)


async def grade(
    pairs: list[Pair], judges: list[ScriptedJudge], store: Store | None, **kw: Any
) -> GradingReport:
    """`grade_pairs` with the scripted judges."""
    return await grade_pairs(pairs, judges, store=store, **kw)


def run_grading(pairs: list[Pair], judges: list[Any], **options: Any) -> GradingReport:
    """`grade_pairs` to its end from synchronous code."""
    return asyncio.run(grade_pairs(pairs, judges, **options))
