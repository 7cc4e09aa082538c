"""The LLM judge seen from a batch: the same request body and the same reply validation as live
grading (`LLMJudge.reader`), at the batch price, in the output mode recorded with the job
(`job_config`), rebuilt from it in another process (`JobJudges`). `BatchReplies` is that reading
alone, picklable, for worker processes; results lines are decoded fast (`loads_line`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec

from grader.batch.collect import model_other_than
from grader.errors import InputError
from grader.judges.llm.grade_token import CompletionBody
from grader.judges.llm.judge import LLMJudge
from grader.judges.llm.replies import GradeReply, accepted_reply, parse_completion
from grader.judges.llm.results import JudgmentRecorder
from grader.models import Doc, Judgment, PromptRef, Query
from grader.prompts import (
    OUTPUT_MODES,
    OutputMode,
    PromptSpec,
    is_truncated,
    load_prompt,
)
from grader.store.judgment_rows import StoredRow
from grader.store.store import Store

_DECODER = msgspec.json.Decoder()


def loads(raw: bytes) -> Any:
    """The JSON value of `raw`, as `json.loads(raw)` gives it (too deeply nested: ValueError):
    what msgspec refuses is decoded again by `json.loads`, whose errors stay the ones given."""
    try:
        try:
            return _DECODER.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return json.loads(raw)
    except RecursionError:
        raise ValueError("the JSON value is nested too deeply to decode") from None


class Response(msgspec.Struct, gc=False):
    status_code: Any = None
    body: CompletionBody | None = None


class ResultLine(msgspec.Struct, gc=False):
    """The keys an import reads of a results line (a default: what `dict.get` gives)."""

    custom_id: Any = None
    response: Response | None = None
    error: Any = None


# A key the import or the reply validator reads must be a field (tests/test_json_lines.py).
_LINE_DECODER = msgspec.json.Decoder(ResultLine)


def loads_line(raw: bytes) -> ResultLine | None:
    """`loads(raw)` with only the keys of `ResultLine` kept, as structs, each value equal to
    `loads`'s; None when the line is not ASCII (msgspec does not check UTF-8 in skipped parts)
    or not of that shape: then decode it whole."""
    if not raw.isascii():
        return None
    try:
        return _LINE_DECODER.decode(raw)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None


@dataclass(frozen=True)
class BatchReplies:
    """How one batch judge reads an output line's body, and its fingerprint: no client, so it
    can be sent to another process."""

    reader: JudgmentRecorder
    mode: OutputMode
    judge_id: str
    prompt_ref: PromptRef | None
    fingerprint: dict[str, Any]

    def parse_reply(self, body: Mapping[str, Any], query: Query, doc: Doc, key: str) -> Judgment:
        """A Judgment at the batch price: ok, or failed when live grading would refuse it."""
        truncated = is_truncated(self.reader.prompt, doc)  # render_messages's, without rendering
        return self.reader.judgment(
            dict(body), query, doc, key=key, mode=self.mode, truncated=truncated
        )

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
        recorder = self.reader
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
        source = store.source_for(recorder.judge_id, recorder.ref, self.fingerprint)
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
            live.reader, self.mode, self.judge_id, self.prompt_ref, live.fingerprint()
        )
        self.parse_reply = self.replies.parse_reply

    def build_request(self, query: Query, doc: Doc) -> dict[str, Any]:
        return self.live.build_request(query, doc, mode=self.mode)


MakeJudge = Callable[[str, PromptSpec], LLMJudge]  # (model, prompt) -> the live judge


def job_config(
    judge: LLMBatchJudge, prompt_arg: str, select: Sequence[str] | None = None
) -> dict[str, Any]:
    """What a job records to rebuild its judge in another process, and the regrade's
    --select (`batch collect` writes what that regrade would)."""
    spec = judge.live.prompt
    config = {
        "judge_id": judge.judge_id,
        "model": judge.live.model,
        "prompt": prompt_arg,
        "prompt_path": str(Path(spec.source).resolve()),
        "prompt_id": spec.id,
        "prompt_sha": spec.sha256,
        "mode": judge.mode,
        "fingerprint": judge.fingerprint(),
    }
    if select is not None:
        config["select"] = list(select)
    return config


class JobJudges:
    """The judges of stored jobs, rebuilt once per configuration by `make_judge`."""

    def __init__(self, make_judge: MakeJudge) -> None:
        self.make_judge = make_judge
        self._jobs: dict[str, LLMBatchJudge] = {}

    def remember(self, config: dict[str, Any], judge: LLMBatchJudge) -> None:
        """Use `judge` for jobs stored with `config`."""
        self._jobs[json.dumps(config, sort_keys=True)] = judge

    def for_job(self, config: dict[str, Any]) -> LLMBatchJudge:
        """The judge a stored job was submitted with, checked against its fingerprint."""
        cache_key = json.dumps(config, sort_keys=True)
        if cache_key in self._jobs:
            return self._jobs[cache_key]
        path = config.get("prompt_path")
        source = path if path and Path(path).is_file() else config.get("prompt")
        if not source or "model" not in config:
            raise InputError("a batch job in the store has no judge settings; regrade again")
        spec = load_prompt(str(source))
        if spec.sha256 != config.get("prompt_sha"):
            raise InputError(
                f"the batch job was sent with prompt {config.get('prompt_id')} "
                f"(sha256 {config.get('prompt_sha')}), but {source} now has sha256 {spec.sha256}",
                hint="restore that prompt file to collect the batch",
            )
        mode = config.get("mode")
        judge = LLMBatchJudge(
            self.make_judge(str(config["model"]), spec),
            mode=mode if mode in OUTPUT_MODES else None,
        )
        if judge.fingerprint() != config.get("fingerprint"):
            raise InputError(
                "the judge rebuilt for a stored batch job does not match the one that sent it",
                hint="use the relgrade version that submitted the batch",
            )
        self._jobs[cache_key] = judge
        return judge
