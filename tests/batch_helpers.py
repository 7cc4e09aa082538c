"""Shared set-up for the batch and regrade tests: a store holding an old version of judgments
(with texts), a new prompt file, and a live judge for the fake server."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from openai import AsyncOpenAI

from grader.judges.replies import InvalidReply, parse_completion
from grader.keys import content_key
from grader.models import Doc, Judgment, JudgmentError, PromptRef, Query
from grader.prompts import PromptSpec, load_prompt, render_messages
from grader.store import Store

OLD_REF = PromptRef(name="passage", version="1", sha256="0" * 64)
OLD_FINGERPRINT = {"judge": "openai:old-model", "prompt_sha": OLD_REF.sha256}


def new_prompt(tmp_path: Path, version: str = "2") -> PromptSpec:
    """A copy of the shipped passage prompt with a changed instruction and version."""
    source = load_prompt("passage-v1").source
    text = Path(source).read_text(encoding="utf-8")
    text = text.replace('version = "1"', f'version = "{version}"').replace(
        "Grade how relevant the passage is to the query.",
        "Grade how relevant the passage is to the query. Be strict about partial answers.",
    )
    path = tmp_path / f"passage-v{version}.toml"
    path.write_text(text, encoding="utf-8")
    return load_prompt(path)


def seed_store(path: Path, n: int = 6, *, failed: tuple[int, ...] = ()) -> list[Judgment]:
    """A store with `n` old judgments (grades 0,1,2,3,0,1,...); indices in `failed` failed."""
    olds: list[Judgment] = []
    with Store(path) as store:
        for i in range(n):
            q = Query(query_id=f"q{i // 3}", text=f"what is topic {i // 3}")
            d = Doc(doc_id=f"d{i}", text=f"passage number {i} about topic {i // 3}", title="T")
            key = content_key(OLD_FINGERPRINT, q.text, d.text)
            if i in failed:
                j = Judgment(
                    query_id=q.query_id,
                    doc_id=d.doc_id,
                    status="failed",
                    judge="openai:old-model",
                    prompt=OLD_REF,
                    key=key,
                    error=JudgmentError(type="InvalidReply", message="x"),
                )
            else:
                j = Judgment(
                    query_id=q.query_id,
                    doc_id=d.doc_id,
                    grade=i % 4,
                    status="ok",
                    reason=f"old reason {i}",
                    judge="openai:old-model",
                    prompt=OLD_REF,
                    key=key,
                    cost=0.001,
                )
            store.put(j, query=q, doc=d, fingerprint=OLD_FINGERPRINT)
            olds.append(j)
    return olds


class MiniJudge:
    """A small live LLM judge for these tests (json_schema mode, one re-ask-free attempt), built on
    the project's prompt rendering and reply validator, like the real LLMJudge."""

    def __init__(self, base_url: str, prompt: PromptSpec, model: str = "fake-model") -> None:
        self.model = model
        self.prompt = prompt
        self.client = AsyncOpenAI(base_url=base_url, api_key="sk-test", max_retries=0)
        self.calls = 0

    @property
    def judge_id(self) -> str:
        return f"openai:{self.model}"

    def fingerprint(self) -> dict[str, Any]:
        return {
            "judge": self.judge_id,
            "model": self.model,
            "prompt_sha": self.prompt.sha256,
            **self.prompt.sampling(),
        }

    def build_request(self, query: Query, doc: Doc) -> dict[str, Any]:
        messages, _ = render_messages(self.prompt, query, doc, mode="json_schema")
        return {
            "model": self.model,
            "messages": messages,
            "response_format": self.prompt.response_format("json_schema"),
            "temperature": self.prompt.temperature,
            "max_tokens": self.prompt.max_tokens,
        }

    async def judge(self, query: Query, doc: Doc, *, key: str) -> Judgment:
        self.calls += 1
        start = time.perf_counter()
        response = await self.client.chat.completions.create(**self.build_request(query, doc))
        body = response.model_dump()
        common: dict[str, Any] = {
            "query_id": query.query_id,
            "doc_id": doc.doc_id,
            "judge": self.judge_id,
            "prompt": self.prompt.ref(),
            "key": key,
            "attempts": 1,
            "latency_ms": (time.perf_counter() - start) * 1000,
        }
        try:
            reply = parse_completion(body, mode="json_schema", spec=self.prompt)
        except InvalidReply as exc:
            return Judgment(
                status="failed",
                error=JudgmentError(type="InvalidReply", message=str(exc), raw_reply=exc.raw),
                **common,
            )
        return Judgment(
            status="ok",
            grade=reply.grade,
            reason=reply.reason,
            usage=reply.usage,
            cost=0.002,
            **common,
        )
