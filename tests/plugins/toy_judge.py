"""A toy judge, added as docs/adding-a-judge.md says: it grades a document by its length.

grade = min(3, len(text) // 10): under 10 characters 0, 10-19 1, 20-29 2, 30 and more 3.
An empty document gets a failed judgment (never a grade). Offline: no model, no endpoint.
"""

from __future__ import annotations

from typing import Any

from grader.errors import InputError
from grader.judges.base import Judge
from grader.judges.registry import JudgeSettings, register_judge
from grader.models import Doc, Judgment, JudgmentError, Query

VERSION = 1


# Step 1: the judge (grader/judges/base.py: judge_id, fingerprint, judge).
class LengthJudge:
    """Grades by document length in characters, `per_grade` characters a grade."""

    def __init__(self, per_grade: int = 10) -> None:
        self.per_grade = per_grade

    @property
    def judge_id(self) -> str:
        return "toylen"

    def fingerprint(self) -> dict[str, Any]:
        return {"judge": self.judge_id, "version": VERSION, "per_grade": self.per_grade}

    async def judge(self, query: Query, doc: Doc, *, key: str) -> Judgment:
        common: dict[str, Any] = {
            "query_id": query.query_id,
            "doc_id": doc.doc_id,
            "judge": self.judge_id,
            "key": key,
            "attempts": 1,
            "cost": 0.0,
        }
        if not doc.text:
            error = JudgmentError(type="EmptyDoc", message=f"document {doc.doc_id} has no text")
            return Judgment(status="failed", error=error, **common)
        grade = min(3, len(doc.text) // self.per_grade)
        return Judgment(status="ok", grade=grade, reason=f"{len(doc.text)} characters", **common)


# Step 2: the factory, reading what it needs from the one settings object.
def make_length_judge(settings: JudgeSettings) -> Judge:
    per_grade = settings.options.get("toy_per_grade", 10)
    if not isinstance(per_grade, int) or per_grade < 1:
        raise InputError("toylen needs a positive number of characters per grade")
    return LengthJudge(per_grade)


# Step 3: one registration.
register_judge("toylen", make_length_judge, help="toy: grades by document length (offline)")
