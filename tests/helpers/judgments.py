"""Judgments, a call record and a judge fingerprint for store tests."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterable, Iterator
from pathlib import Path

from grader.io.files import atomic_write
from grader.models import CallRecord, Judgment, JudgmentError, PromptRef, Usage
from grader.store.store import Store

PROMPT = PromptRef(name="passage", version="1", sha256="sha256:abc")


FP = {"judge": "openai:m", "model": "m", "prompt_sha": "sha256:abc"}


def ok(key: str, grade: int = 2, qid: str = "q1", did: str = "d1") -> Judgment:
    return Judgment(
        query_id=qid,
        doc_id=did,
        grade=grade,
        status="ok",
        judge="openai:m",
        prompt=PROMPT,
        key=key,
        attempts=1,
        usage=Usage(prompt_tokens=10, completion_tokens=3, cached_tokens=2),
        cost=0.001,
        reason="fits",
        distribution=[0.1, 0.1, 0.7, 0.1],
        expected_grade=1.8,
    )


def failed(key: str, qid: str = "q1", did: str = "d1") -> Judgment:
    return Judgment(
        query_id=qid,
        doc_id=did,
        status="failed",
        judge="openai:m",
        prompt=PROMPT,
        key=key,
        attempts=3,
        error=JudgmentError(type="InvalidReply", message="grade 7 out of range", raw_reply="7"),
    )


def call_record(key: str) -> CallRecord:
    """An ok call of the judge of `FP` for the pair (q1, d1)."""
    return CallRecord(
        key=key,
        query_id="q1",
        doc_id="d1",
        judge="openai:m",
        model="m",
        attempt=1,
        outcome="ok",
        output_mode="json_schema",
        latency_ms=12.5,
        usage=Usage(),
        http_status=200,
    )


def stored_judgments(store: Store, **where: str) -> Iterator[Judgment]:
    """The judgments stored in `store` whose `judgment_rows` columns equal `where`, by
    (query_id, doc_id, judge), read on a connection of their own."""
    sql = "SELECT judgment FROM judgment_rows"
    if where:
        sql += " WHERE " + " AND ".join(f"{column} = ?" for column in where)
    sql += " ORDER BY query_id, doc_id, judge, key"
    with contextlib.closing(sqlite3.connect(store.path)) as conn:
        texts = [text for (text,) in conn.execute(sql, list(where.values()))]
    return iter([Judgment.model_validate_json(text) for text in texts])


def write_judgments(path: str | Path, judgments: Iterable[Judgment]) -> int:
    """Write judgments as JSONL atomically (`.gz` when the name says so); returns the count."""
    count = 0
    with atomic_write(path) as out:
        for judgment in judgments:
            out.write(judgment.model_dump_json())
            out.write("\n")
            count += 1
    return count
