"""A small export, its results answered by the fake engine, and their import: what the batch
import tests share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from grader.batch.adapter import JobJudges, LLMBatchJudge, job_config
from grader.batch.files.export_files import export_requests
from grader.batch.files.import_files import Importer
from grader.batch.files.import_followup import ImportSummary
from grader.judges.llm.judge import LLMJudge
from grader.models import Doc, Query
from grader.prompts import PromptSpec, load_prompt
from grader.store.store import Store
from tests import fake_engine
from tests.fakeserver import FakeServer


def unreachable_judge(model: str, prompt: PromptSpec) -> LLMJudge:
    return LLMJudge(model=model, prompt=prompt, base_url="http://127.0.0.1:9/v1")


def export_pairs(tmp_path: Path, n: int) -> tuple[Path, list[Path]]:
    """`n` pairs exported into a fresh store: (store, request files)."""
    db = tmp_path / "export.db"
    judge = LLMBatchJudge(unreachable_judge("fake-model", load_prompt("passage")))
    pairs = (
        (
            Query(query_id=f"q{i // 10}", text=f"query {i // 10}"),
            Doc(doc_id=f"d{i}", text=f"doc {i} " + "words " * (i % 7)),
        )
        for i in range(n)
    )
    with Store(db) as store:
        summary = export_requests(
            store, judge, job_config(judge, "passage"), pairs, tmp_path / "requests"
        )
    return db, summary.files


def engine_answer(server: FakeServer, bad: set[str]) -> fake_engine.Answer:
    """Each body answered by the fake server; those whose user message names a doc in `bad`
    get grade 7, which the validator refuses."""

    def answer(body: dict[str, Any]) -> tuple[int, dict[str, Any] | None, str | None]:
        reply = server.completion_for(body)
        if any(f"doc {d} " in m["content"] for m in body["messages"][1:] for d in bad):
            reply["choices"][0]["message"]["content"] = '{"reason": "x", "grade": 7}'
        return 200, reply, None

    return answer


def engine_results(
    server: FakeServer, requests: list[Path], out: Path, *, bad: set[str], **kw: Any
) -> list[Path]:
    out.mkdir(exist_ok=True)
    paths = []
    for path in requests:
        target = out / f"{path.stem}.results.jsonl"
        fake_engine.run_batch(path, target, engine_answer(server, bad), **kw)
        paths.append(target)
    return paths


def import_results(db: Path, results: list[Path], workers: int) -> ImportSummary:
    with (
        Store(db) as store,
        Importer(
            store,
            JobJudges(unreachable_judge).for_job,
            workers=workers,
            range_bytes=20_000,
            batch_lines=300,
        ) as importer,
    ):
        return importer.run(results)
