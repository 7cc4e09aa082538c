"""The Judgment one reply body makes, validated as live grading validates it, in a form that can
be sent to another process (no client, no callbacks): what imports of batch results hand to
their worker processes (`LLMJudge.reply_reader`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grader.judges.llm.replies import InvalidReply, parse_completion
from grader.judges.llm.results import CallState, JudgmentRecorder
from grader.models import Doc, Judgment, Query
from grader.prompts import OutputMode, PromptSpec


@dataclass(frozen=True)
class ReplyReader:
    """A judge's prompt and recorder (its id, model, prompt ref, prices, secrets; no `on_call`)."""

    prompt: PromptSpec
    recorder: JudgmentRecorder

    def judgment(
        self,
        body: dict[str, Any],
        query: Query,
        doc: Doc,
        *,
        key: str,
        mode: OutputMode,
        truncated: bool,
        batch: bool = True,
    ) -> Judgment:
        """A Judgment from one reply body obtained elsewhere (a batch output line): the same
        validation as live grading, but no re-ask is possible, so an invalid reply fails."""
        state = CallState(query, doc, key, mode, [], truncated, attempts=1)
        try:
            reply = parse_completion(body, mode=mode, spec=self.prompt)
        except InvalidReply as exc:
            state.usage = exc.usage
            state.last_raw = exc.raw
            return self.recorder.failed(
                state, "InvalidReply", f"{exc.kind}: {exc.message}", None, batch=batch
            )
        return self.recorder.ok(state, reply, None, batch=batch)
