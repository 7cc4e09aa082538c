"""The data model shared by every part: queries, documents, judgments. A failure is never a grade:
`Judgment.grade` is None unless `status` is "ok", enforced here."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

GRADES: tuple[int, ...] = (0, 1, 2, 3)
"""The grade scale, the one place it is written: readers, checks and tables take it from here."""
MIN_GRADE = GRADES[0]
MAX_GRADE = GRADES[-1]

Grade = Annotated[int, Field(ge=MIN_GRADE, le=MAX_GRADE)]
"""A relevance grade, 0..3. What each value means belongs to the prompt file."""

JudgmentStatus = Literal["ok", "failed"]


class Query(BaseModel):
    """A query to grade against."""

    model_config = ConfigDict(frozen=True)

    query_id: str
    text: str


class Doc(BaseModel):
    """A document (passage, code chunk, ...); fields besides id, text, title go in metadata."""

    model_config = ConfigDict(frozen=True)

    doc_id: str
    text: str
    title: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Usage(BaseModel):
    """Tokens of one judgment, summed over its attempts (frozen: one may be shared)."""

    model_config = ConfigDict(frozen=True)

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(**{k: getattr(self, k) + getattr(other, k) for k in Usage.model_fields})


@dataclass(frozen=True)
class CallRecord:
    """One HTTP attempt for the call log (a plain dataclass: one per attempt, on the hot path)."""

    key: str
    query_id: str
    doc_id: str
    judge: str
    model: str
    attempt: int
    outcome: str
    output_mode: str
    latency_ms: float
    usage: Usage
    http_status: int | None = None
    error_type: str | None = None
    error_message: str | None = None
    created_at: datetime = field(default_factory=lambda: datetime.now(UTC))


class JudgmentError(BaseModel):
    """Why a judgment failed: the exception class, its message, and the last raw reply if any."""

    type: str
    message: str
    raw_reply: str | None = None


_HEX64 = re.compile(r"[0-9a-fA-F]{64}")


def bare_sha256(digest: str) -> str:
    """A sha256 digest as 64 bare hex digits (`sha256:` dropped); anything else as given."""
    hexpart = digest.removeprefix("sha256:")
    if len(hexpart) == 64 and _HEX64.fullmatch(hexpart):  # a regex: read per stored judgment
        return hexpart.lower()
    return digest


class PromptRef(BaseModel):
    """Which prompt file produced a judgment: `name@version` and the file's bare-hex sha256."""

    model_config = ConfigDict(frozen=True)  # shared by every judgment of a judge

    name: str
    version: str
    sha256: str

    @field_validator("sha256")
    @classmethod
    def _one_format(cls, value: str) -> str:
        return bare_sha256(value)

    def __str__(self) -> str:
        return f"{self.name}@{self.version}"


class Judgment(BaseModel):
    """One graded pair, or one failure to grade it (`distribution`: P(grade) from logprobs)."""

    query_id: str
    doc_id: str
    grade: Grade | None = None
    status: JudgmentStatus
    reason: str | None = None
    distribution: list[float] | None = None
    expected_grade: float | None = None
    output_mode: str | None = None
    notes: list[str] | None = None
    judge: str
    prompt: PromptRef | None = None
    key: str
    attempts: int = 0
    usage: Usage = Field(default_factory=Usage)
    cost: float | None = None
    latency_ms: float | None = None
    truncated: bool = False
    error: JudgmentError | None = None
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    judges: dict[str, int | None] | None = None
    disagreement: float | None = None
    verification: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _failure_is_never_a_grade(self) -> Judgment:
        if self.status == "ok" and self.grade is None:
            raise ValueError("an ok judgment must carry a grade")
        if self.status == "failed" and self.grade is not None:
            raise ValueError("a failed judgment must not carry a grade")
        if self.status == "failed" and self.error is None:
            raise ValueError("a failed judgment must say why (error)")
        if self.distribution is not None and len(self.distribution) != len(GRADES):
            raise ValueError("distribution must hold P(grade) for 0..3")
        return self

    @property
    def confidence(self) -> float | None:
        """The probability of the chosen grade, when a distribution is known."""
        if self.distribution is None or self.grade is None:
            return None
        return self.distribution[self.grade]
