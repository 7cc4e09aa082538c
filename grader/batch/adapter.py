"""The LLM judge seen from the Batch API: the same request body and the same reply validator as
live grading, and the batch price.

`LLMBatchJudge` wraps the live judge (anything with `judge_id`, `model`, `prompt` (PromptSpec),
`fingerprint()`, `build_request(query, doc)` and `async judge(query, doc, key=)`, i.e.
`grader.judges.llm.LLMJudge`). A batch output line's body goes through
`grader.judges.replies.parse_completion`, exactly what the live judge calls, with the output mode
read back from the request that was sent, so a reply is accepted or refused the same way however
it arrived.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from grader.cost import PriceTable
from grader.judges.replies import parse_completion
from grader.models import Doc, Judgment, PromptRef, Query
from grader.prompts import OutputMode, PromptSpec, render_messages


def request_mode(body: Mapping[str, Any]) -> OutputMode:
    """The output mode a chat.completions request body asks for."""
    fmt = body.get("response_format")
    if isinstance(fmt, Mapping) and fmt.get("type") in ("json_schema", "json_object"):
        return cast(OutputMode, fmt["type"])
    return "text"


class LLMBatchJudge:
    """Adapts a live LLM judge to `grader.batch.jobs.BatchJudge`."""

    def __init__(self, live: Any, *, prices: PriceTable | None = None) -> None:
        self.live = live
        self.prices = prices

    @property
    def judge_id(self) -> str:
        return str(self.live.judge_id)

    @property
    def spec(self) -> PromptSpec:
        return cast(PromptSpec, self.live.prompt)

    @property
    def prompt_ref(self) -> PromptRef | None:
        return self.spec.ref()

    def fingerprint(self) -> dict[str, Any]:
        return cast(dict[str, Any], self.live.fingerprint())

    def build_request(self, query: Query, doc: Doc) -> dict[str, Any]:
        return cast(dict[str, Any], self.live.build_request(query, doc))

    def parse_reply(self, body: Mapping[str, Any], query: Query, doc: Doc, key: str) -> Judgment:
        """Validate one batch output body into an ok Judgment at the batch price (raises
        InvalidReply exactly when live grading would refuse the reply)."""
        mode = request_mode(self.build_request(query, doc))
        reply = parse_completion(dict(body), mode=mode, spec=self.spec)
        _, truncated = render_messages(self.spec, query, doc, mode=mode)
        cost = None
        if self.prices is not None:
            cost = self.prices.cost(str(self.live.model), reply.usage, batch=True)
        return Judgment(
            query_id=query.query_id,
            doc_id=doc.doc_id,
            grade=reply.grade,
            status="ok",
            reason=reply.reason,
            distribution=reply.distribution,
            expected_grade=reply.expected_grade,
            judge=self.judge_id,
            prompt=self.prompt_ref,
            key=key,
            attempts=1,
            usage=reply.usage,
            cost=cost,
            truncated=truncated,
        )

    async def judge(self, query: Query, doc: Doc, *, key: str) -> Judgment:
        return cast(Judgment, await self.live.judge(query, doc, key=key))
