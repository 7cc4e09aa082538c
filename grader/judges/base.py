"""What every judge (LLM, ensemble, lexical) promises the grading pipeline.

A judge never raises for a per-pair failure: it returns a `Judgment` with status "failed" and the
error. It raises (`JudgeError`) only for what dooms the whole run (bad credentials, unknown model),
so the pipeline can stop early instead of failing every pair the same way.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from grader.models import Doc, Judgment, Query


@runtime_checkable
class Judge(Protocol):
    @property
    def judge_id(self) -> str:
        """A short stable id, e.g. `openai:gpt-4o-mini` or `lexical` (`Judgment.judge`)."""
        ...

    def fingerprint(self) -> dict[str, Any]:
        """Everything besides query and document text that changes the grade: judge id, model,
        prompt sha, sampling params. Hashed into the content key (see `grader.keys`)."""
        ...

    async def judge(self, query: Query, doc: Doc, *, key: str) -> Judgment:
        """Grade one pair: an ok or a failed Judgment carrying `key`, never a made-up grade."""
        ...
