"""A toy judge, added as docs/adding-a-judge.md says: it grades a document by its length.

grade = min(3, len(text) // 10): under 10 characters 0, 10-19 1, 20-29 2, 30 and more 3.
An empty document gets a failed judgment (never a grade). Offline: no model, no endpoint.
"""

from __future__ import annotations

from typing import Any

from relgrade import (
    Doc,
    InputError,
    Judge,
    JudgeSettings,
    Judgment,
    JudgmentError,
    Query,
    failed_judgment,
    ok_judgment,
    register_judge,
)

VERSION = 1


# Step 1: the judge (relgrade.Judge: judge_id, fingerprint, judge).
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
        # ok_judgment / failed_judgment fill in the ids, the judge id and the key asked under
        if not doc.text:
            error = JudgmentError(type="EmptyDoc", message=f"document {doc.doc_id} has no text")
            return failed_judgment(self, query, doc, key=key, error=error, attempts=1, cost=0.0)
        grade = min(3, len(doc.text) // self.per_grade)
        reason = f"{len(doc.text)} characters"
        return ok_judgment(
            self, query, doc, key=key, grade=grade, reason=reason, attempts=1, cost=0.0
        )


# Step 2: the factory, reading what it needs from the one settings object.
def make_length_judge(settings: JudgeSettings) -> Judge:
    per_grade = settings.options.get("toy_per_grade", 10)
    if not isinstance(per_grade, int) or per_grade < 1:
        raise InputError("toylen needs a positive number of characters per grade")
    return LengthJudge(per_grade)


# Step 3: one registration.
register_judge("toylen", make_length_judge, help="toy: grades by document length (offline)")
