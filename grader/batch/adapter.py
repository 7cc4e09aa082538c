"""The LLM judge seen from a batch: the same request body and the same reply validation as live
grading (`LLMJudge.reply_reader`), at the batch price, in the output mode recorded with the job.
`BatchReplies` is that reading alone, picklable, for worker processes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from grader.batch.collect import model_other_than
from grader.batch.json_lines import ResultLine
from grader.judges.llm.judge import LLMJudge
from grader.judges.llm.replies import GradeReply, accepted_reply, parse_completion
from grader.judges.llm.reply_reader import ReplyReader
from grader.models import Doc, Judgment, PromptRef, Query
from grader.prompts import OutputMode, is_text_truncated, is_truncated
from grader.store.judgment_rows import StoredRow
from grader.store.store import Store


@dataclass(frozen=True)
class BatchReplies:
    """How one batch judge reads an output line's body, and its fingerprint: no client, so it
    can be sent to another process."""

    reader: ReplyReader
    mode: OutputMode
    judge_id: str
    prompt_ref: PromptRef | None
    fingerprint: dict[str, Any]

    def parse_reply(self, body: Mapping[str, Any], query: Query, doc: Doc, key: str) -> Judgment:
        """A Judgment at the batch price: ok, or failed when live grading would refuse it."""
        truncated = is_truncated(self.reader.prompt, doc)  # render_messages's, without rendering
        return self.reader.judgment(
            dict(body), query, doc, key=key, mode=self.mode, truncated=truncated, batch=True
        )

    def is_cut(self, text: str) -> bool:
        return is_text_truncated(self.reader.prompt, text)

    @property
    def doc_budget(self) -> int:
        return self.reader.prompt.doc_budget_chars

    def valid_reply(self, body: Mapping[str, Any]) -> GradeReply | None:
        """The validated reply of an output body, when live grading would accept it."""
        try:
            plain = body if type(body) is dict else dict(body)
            return parse_completion(plain, mode=self.mode, spec=self.reader.prompt)
        except Exception:  # InvalidReply, or a malformed body: parse_reply words it
            return None

    def line_reply(self, line: ResultLine) -> GradeReply | None:
        """The validated reply of a results line decoded into structs (`loads_line`), when it
        holds a reply of the model exported that live grading accepts; None otherwise (then
        read it as a dict)."""
        response = line.response
        if response is None or line.error or response.status_code != 200:
            return None
        body = response.body
        if body is None or model_other_than(body.model, self.fingerprint.get("model")):
            return None
        return accepted_reply(body, mode=self.mode, spec=self.reader.prompt)

    def ok_row(
        self,
        store: Store,
        reply: GradeReply,
        query_id: str,
        doc_id: str,
        truncated: bool,
        key: str,
        created_at: datetime | None = None,
    ) -> StoredRow:
        """The store row of the ok judgment `parse_reply` makes of `reply`, by the store's one
        encoder without a Judgment between (`Store.stored_row`); made at `created_at`."""
        recorder = self.reader.recorder
        usage = reply.usage
        fields = {
            "key": key,
            "query_id": query_id,
            "doc_id": doc_id,
            "status": "ok",
            "grade": reply.grade,
            "reason": reply.reason,
            "distribution": reply.distribution,
            "expected_grade": reply.expected_grade,
            "attempts": 1,
            "usage": usage,
            "cost": recorder.cost(usage, True),
            "truncated": truncated,
            "created_at": datetime.now(UTC) if created_at is None else created_at,
            "output_mode": self.mode,
            "notes": reply.notes,
        }
        config = recorder.config
        source = store.source_for(config.judge_id, config.prompt, self.fingerprint)
        return store.stored_row(fields, source)


class LLMBatchJudge:
    """Adapts an `LLMJudge` to `grader.batch.api.jobs.BatchJudge`: its id, prompt, fingerprint
    and live `judge`, with its request and reply checks in the batch's output `mode`."""

    def __init__(self, live: LLMJudge, *, mode: OutputMode | None = None) -> None:
        self.live = live
        self.mode: OutputMode = mode or live.output_mode
        self.judge_id, self.prompt_ref = live.judge_id, live.prompt.ref()
        self.fingerprint, self.judge = live.fingerprint, live.judge
        self.replies = BatchReplies(
            live.reply_reader(), self.mode, self.judge_id, self.prompt_ref, live.fingerprint()
        )
        self.parse_reply = self.replies.parse_reply

    def build_request(self, query: Query, doc: Doc) -> dict[str, Any]:
        return self.live.build_request(query, doc, mode=self.mode)
