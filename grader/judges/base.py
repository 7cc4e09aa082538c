"""What every judge (LLM, ensemble, lexical) promises the grading pipeline, and the helpers that
make its judgments.

A judge returns a failed `Judgment` for a per-pair failure and raises `JudgeError` only for what
dooms the run. It answers under the key it was asked with (`ok` and `failed` copy it).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from grader.errors import JudgeError
from grader.models import Doc, Judgment, JudgmentError, JudgmentStatus, Query


@runtime_checkable
class Judge(Protocol):
    @property
    def judge_id(self) -> str:
        """A short stable id, e.g. `openai:gpt-4o-mini` or `lexical` (`Judgment.judge`)."""

    def fingerprint(self) -> dict[str, Any]:
        """Everything besides query and document text that changes the grade: judge id, model,
        prompt sha, sampling params. Hashed into the content key (see `grader.keys`)."""

    async def judge(self, query: Query, doc: Doc, *, key: str) -> Judgment:
        """Grade one pair: an ok or a failed Judgment carrying `key`, never a made-up grade."""


def ok(
    judge: Judge | str, query: Query, doc: Doc, *, key: str, grade: int, **fields: Any
) -> Judgment:
    """The ok judgment of `judge` (or a judge id) for (query, doc) asked under `key`."""
    return _judgment("ok", judge, query, doc, key, grade=grade, **fields)


def failed(
    judge: Judge | str,
    query: Query,
    doc: Doc,
    *,
    key: str,
    error: JudgmentError | BaseException,
    **fields: Any,
) -> Judgment:
    """The failed judgment (never a grade); an exception `error` becomes its name and message."""
    if isinstance(error, BaseException):
        error = JudgmentError(type=type(error).__name__, message=str(error) or repr(error))
    return _judgment("failed", judge, query, doc, key, error=error, **fields)


def _judgment(
    status: JudgmentStatus, judge: Judge | str, query: Query, doc: Doc, key: str, **fields: Any
) -> Judgment:
    judge_id = judge if isinstance(judge, str) else judge.judge_id
    return Judgment(
        status=status, query_id=query.query_id, doc_id=doc.doc_id, judge=judge_id, key=key, **fields
    )


def check_key(judge: Judge, judgment: Judgment, key: str) -> Judgment:
    """`judgment` if it answers under `key`; else a JudgeError (no rerun would find it)."""
    if judgment.key != key:
        raise JudgeError(
            f"judge {judge.judge_id!r} ({type(judge).__module__}.{type(judge).__qualname__}) "
            f"answered under the key {judgment.key!r}, not the key {key!r} it was asked "
            "under: the pipeline stores each answer under the key it asks with, so every rerun "
            "would grade every pair again (relgrade.ok_judgment / failed_judgment keep the key)"
        )
    return judgment
