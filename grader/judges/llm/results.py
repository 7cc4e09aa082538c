"""What the LLM judge makes of its attempts and of batch reply bodies: the Judgment (ok, or failed
with the reason), the `CallRecord` of every HTTP attempt, the API key redacted from every text."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import openai

from grader.cost import PriceTable
from grader.judges.base import failed, ok
from grader.judges.llm.replies import GradeReply, InvalidReply, parse_completion
from grader.judges.llm.retry import status_of
from grader.judges.llm.transport import connection_message
from grader.models import CallRecord, Doc, Judgment, JudgmentError, PromptRef, Query, Usage
from grader.prompts import OutputMode, PromptSpec
from grader.redact import redact


@dataclass
class CallState:
    """What one judgment's attempts share: history, counters, the last reply."""

    query: Query
    doc: Doc
    key: str
    mode: OutputMode
    messages: list[dict[str, Any]]
    truncated: bool
    attempts: int = 0
    counted: int = 0
    reasks: int = 0
    transient: int = 0
    usage: Usage = field(default_factory=Usage)
    last_raw: str | None = None
    invalid: InvalidReply | None = None  # the last invalid reply, should a later attempt time out
    failed_on: str | None = None  # the server whose last attempt failed (the next goes elsewhere)


@dataclass(frozen=True)
class JudgmentRecorder:
    """Builds one judge's judgments and call records, its secrets redacted; without `on_call` it
    reads reply bodies obtained elsewhere (batch lines) in another process."""

    judge_id: str
    model: str
    prompt: PromptSpec
    prices: PriceTable | None = None
    on_call: Callable[[CallRecord], None] | None = None
    secrets: tuple[str, ...] = ()

    @cached_property
    def ref(self) -> PromptRef:
        return self.prompt.ref()

    def judgment(
        self,
        body: dict[str, Any],
        query: Query,
        doc: Doc,
        *,
        key: str,
        mode: OutputMode,
        truncated: bool,
    ) -> Judgment:
        """A batch line's reply body judged at the batch price (no re-ask: invalid fails)."""
        state = CallState(query, doc, key, mode, [], truncated, attempts=1)
        try:
            reply = parse_completion(body, mode=mode, spec=self.prompt)
        except InvalidReply as exc:
            state.usage = exc.usage
            state.last_raw = exc.raw
            return self.failed(state, "InvalidReply", self.message(exc), None)
        return self.ok(state, reply, None)

    def ok(self, state: CallState, reply: GradeReply, started: float | None) -> Judgment:
        """The ok judgment from a valid `reply` (`started` None: a batch line, no latency)."""
        usage = state.usage if started is not None else reply.usage
        return ok(
            self.judge_id,
            state.query,
            state.doc,
            grade=reply.grade,
            reason=reply.reason,
            distribution=reply.distribution,
            expected_grade=reply.expected_grade,
            output_mode=state.mode,
            notes=reply.notes,
            **self._common(state, usage, started),
        )

    def failed(self, state: CallState, kind: str, message: str, started: float | None) -> Judgment:
        """The failed judgment: error `kind` and `message`, the last raw reply, redacted."""
        raw = self.redact(state.last_raw) if state.last_raw is not None else None
        return failed(
            self.judge_id,
            state.query,
            state.doc,
            error=JudgmentError(type=kind, message=self.redact(message), raw_reply=raw),
            **self._common(state, state.usage, started),
        )

    def _common(self, state: CallState, usage: Usage, started: float | None) -> dict[str, Any]:
        """The fields an ok and a failed judgment share (`started` None: a batch line)."""
        return {
            "key": state.key,
            "prompt": self.ref,
            "attempts": state.attempts,
            "usage": usage,
            "cost": self.cost(usage, started is None),
            "latency_ms": None if started is None else (time.perf_counter() - started) * 1000.0,
            "truncated": state.truncated,
        }

    def cost(self, usage: Usage, batch: bool) -> float | None:
        """USD of `usage` at the judge's price (None when it has no price table)."""
        return self.prices.cost(self.model, usage, batch=batch) if self.prices else None

    def record(
        self,
        state: CallState,
        outcome: str,
        t0: float,
        usage: Usage,
        *,
        exc: BaseException | None = None,
        status: int | None = None,
    ) -> None:
        """Report one HTTP attempt to `on_call`, if any."""
        if self.on_call is None:
            return
        kind = f".{exc.kind}" if isinstance(exc, InvalidReply) else ""  # InvalidReply.<kind>
        self.on_call(
            CallRecord(
                key=state.key,
                query_id=state.query.query_id,
                doc_id=state.doc.doc_id,
                judge=self.judge_id,
                model=self.model,
                attempt=state.attempts,
                outcome=outcome,
                output_mode=state.mode,
                latency_ms=(time.perf_counter() - t0) * 1000.0,
                usage=usage,
                http_status=status if status is not None else (status_of(exc) if exc else None),
                error_type=None if exc is None else type(exc).__name__ + kind,
                error_message=self.message(exc) if exc is not None else None,
            )
        )

    def message(self, exc: BaseException) -> str:
        """The message for `exc`, redacted (the server's own message for a status error)."""
        if isinstance(exc, InvalidReply):
            return self.redact(f"{exc.kind}: {exc.message}")
        text = str(exc)
        if isinstance(exc, openai.APIConnectionError):
            text = connection_message(exc)  # "Connection error. (connection refused: ...)"
        if isinstance(exc, openai.APIStatusError):
            body = exc.body
            if isinstance(body, dict):
                inner = body.get("error", body)
                if isinstance(inner, dict) and inner.get("message"):
                    text = str(inner["message"])
            text = (
                f"{exc.status_code} {text}" if not text.startswith(str(exc.status_code)) else text
            )
        return self.redact(text)

    def redact(self, text: str) -> str:
        """`text` with every secret masked (`grader.redact`)."""
        return redact(text, self.secrets)
