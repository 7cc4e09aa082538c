"""Submitting, following and collecting Batch API jobs, resumable at every step: a job is
`prepared`, `uploaded`, `submitted`, then `collected`, each recorded before the next begins, so
any process can pick up any open job (an uploaded one first looks for a batch already made from
its file)."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from grader import defaults
from grader.batch.adapter import LLMBatchJudge
from grader.batch.api.client import TERMINAL_STATUSES, BatchClient, BatchInfo
from grader.batch.api.state import BatchState, Item, Job
from grader.batch.collect import (
    LineProblem,
    ParsedFiles,
    failed_judgment,
    parse_result_files,
    retry_live,
    texts_by_key,
)
from grader.batch.requests import MAX_BYTES_PER_FILE, MAX_REQUESTS_PER_FILE, split_requests
from grader.errors import JudgeError, NoBatchAPI
from grader.models import Doc, Judgment, Query
from grader.store.store import Store

BatchJudge = LLMBatchJudge  # what the batch path needs of a judge: live grading's request, checks

JudgeFor = Callable[[dict[str, Any]], BatchJudge]  # the judge of a job's stored config


@dataclass(frozen=True)
class BatchOptions:
    """Limits and timing: the Batch API's limits and a gentle polling pace."""

    max_requests: int = MAX_REQUESTS_PER_FILE
    max_bytes: int = MAX_BYTES_PER_FILE
    poll_initial: float = 5.0
    poll_factor: float = 1.5
    poll_cap: float = 120.0
    # How long `run(wait=True)` polls at most: the API ends every batch within its 24 h window.
    max_wait_s: float = 26 * 3600.0
    live_retry: bool = True
    concurrency: int = defaults.CONCURRENCY


@dataclass
class CollectSummary:
    """What collecting produced, per outcome, in requests (one per content key), and the id
    pairs that got a judgment."""

    jobs: int = 0
    batch: int = 0
    live: int = 0
    failed: int = 0
    pairs: int = 0
    problems: dict[str, LineProblem] = field(default_factory=dict)
    waited_out: bool = False  # `run` stopped polling after `BatchOptions.max_wait_s`

    def add(self, other: CollectSummary) -> None:
        for name in ("jobs", "pairs", "batch", "live", "failed"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.problems.update(other.problems)


Progress = Callable[[Sequence[Job]], None]
Sleep = Callable[[float], Awaitable[None]]


class BatchRunner:
    """Submit pairs as batches, and drive open jobs to `collected`."""

    def __init__(
        self,
        store: Store,
        client: BatchClient,
        *,
        options: BatchOptions | None = None,
        state: BatchState | None = None,
    ) -> None:
        self.store = store
        self.client = client
        self.options = options or BatchOptions()
        self.state = state or BatchState(store)

    async def submit(
        self,
        judge: BatchJudge,
        pairs: Sequence[tuple[Query, Doc, str]],
        *,
        config: dict[str, Any],
    ) -> list[int]:
        """Record, upload and create batches for (query, doc, key) pairs (one request per
        key), split under the options' limits; the job ids."""
        first: dict[str, tuple[Query, Doc]] = {}
        items: dict[str, list[Item]] = {}
        for query, doc, key in pairs:
            first.setdefault(key, (query, doc))
            items.setdefault(key, []).append(Item(key, query.query_id, doc.doc_id))
        requests = ((k, judge.build_request(*first[k])) for k in first)
        job_ids: list[int] = []
        for keys, content in split_requests(
            requests, max_requests=self.options.max_requests, max_bytes=self.options.max_bytes
        ):
            job_items = [item for key in keys for item in items[key]]
            job_id = self.state.add_job(config, job_items, base_url=self.client.base_url)
            try:
                await self._upload(job_id, content)
            except NoBatchAPI:
                self.state.drop_prepared(job_id)  # nothing reached the server
                raise
            except JudgeError as exc:  # refused: keep no open job holding these keys back
                self.state.drop_prepared(job_id)
                raise JudgeError(
                    f"{exc} (a server without the Batch API, such as vLLM, Ollama or llama.cpp, "
                    "regrades without --batch)"
                ) from exc
            job_ids.append(job_id)
            await self._create(self.state.job(job_id))
        return job_ids

    async def _upload(self, job_id: int, content: bytes) -> None:
        file_id = await self.client.upload(content, filename=f"relgrade-job-{job_id}.jsonl")
        self.state.set_uploaded(job_id, file_id)

    async def _create(self, job: Job) -> BatchInfo:
        assert job.input_file_id is not None
        info = await self.client.find_by_input_file(job.input_file_id)
        if info is None:
            info = await self.client.create(
                job.input_file_id, metadata={"relgrade_job": str(job.job_id)}
            )
        self.state.set_remote(job.job_id, info)
        return info

    async def advance(self, job: Job, judge_for: JudgeFor) -> Job:
        """Take one step on an open job: upload, create, or check its status."""
        if job.phase == "prepared":
            items = texts_by_key(self.store, self.state.items(job.job_id))
            judge = judge_for(job.judge_config)
            requests = [(k, judge.build_request(q, d)) for k, (q, d) in items.items()]
            ((_, content),) = split_requests(requests, max_requests=len(requests) or 1)
            await self._upload(job.job_id, content)
            await self._create(self.state.job(job.job_id))
        elif job.phase == "uploaded":
            await self._create(job)
        elif job.phase == "submitted" and job.remote_status not in TERMINAL_STATUSES:
            assert job.batch_id is not None
            self.state.set_remote(job.job_id, await self.client.retrieve(job.batch_id))
        return self.state.job(job.job_id)

    async def run(
        self,
        judge_for: JudgeFor,
        *,
        job_ids: Sequence[int] | None = None,
        wait: bool = True,
        progress: Progress | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> CollectSummary:
        """Drive open jobs (all, or `job_ids`): advance each, collect the finished ones; with
        `wait`, poll with growing delays until all are collected or `options.max_wait_s`."""
        summary = CollectSummary()
        options = self.options
        delay = min(options.poll_initial, options.poll_cap)
        deadline = clock() + options.max_wait_s
        while True:
            open_jobs = [
                j for j in self.state.jobs(open_only=True) if job_ids is None or j.job_id in job_ids
            ]
            if not open_jobs:
                break
            current = [await self.advance(job, judge_for) for job in open_jobs]
            if progress is not None:
                progress(current)
            for job in current:
                if job.phase == "submitted" and job.remote_status in TERMINAL_STATUSES:
                    summary.add(await self.collect(job, judge_for(job.judge_config)))
            if not wait:
                break
            if any(self.state.job(j.job_id).phase != "collected" for j in current):
                if clock() >= deadline:
                    summary.waited_out = True
                    break
                await sleep(min(delay, max(0.0, deadline - clock())))
                delay = min(delay * options.poll_factor, options.poll_cap)
        return summary

    async def collect(self, job: Job, judge: BatchJudge) -> CollectSummary:
        """Download a finished batch's files, validate every line, re-ask or fail the rest, and
        store a judgment for every id pair of the job."""
        items = self.state.items(job.job_id)
        texts = texts_by_key(self.store, items)
        output = await self.client.download(job.output_file_id) if job.output_file_id else b""
        errors = await self.client.download(job.error_file_id) if job.error_file_id else b""
        parsed: ParsedFiles = parse_result_files(
            output, errors, items=texts, parse=judge.parse_reply
        )
        if job.remote_status in ("failed", "cancelled"):
            for key in texts:
                if key not in parsed.judgments:
                    parsed.problems[key] = LineProblem(
                        f"Batch:{job.remote_status}", f"batch {job.batch_id} {job.remote_status}"
                    )
        outcomes = {key: "batch" for key in parsed.judgments}
        final: dict[str, Judgment] = dict(parsed.judgments)
        if parsed.problems and self.options.live_retry:
            concurrency = self.options.concurrency
            retried = await retry_live(parsed.problems, texts, judge, concurrency=concurrency)
            for key, judgment in retried.items():
                final[key] = judgment
                outcomes[key] = "live" if judgment.status == "ok" else "failed"
        else:
            for key, problem in parsed.problems.items():
                query, doc = texts[key]
                final[key] = failed_judgment(
                    key, query, doc, problem, judge_id=judge.judge_id, prompt=judge.prompt_ref
                )
                outcomes[key] = "failed"
        fingerprint = judge.fingerprint()
        self.store.put_many((_for_pair(final[item.key], item), fingerprint) for item in items)
        self.state.set_outcomes(job.job_id, outcomes)
        self.state.set_collected(job.job_id)
        pairs = len({(item.query_id, item.doc_id) for item in items})
        n = Counter(outcomes.values())
        return CollectSummary(1, n["batch"], n["live"], n["failed"], pairs, dict(parsed.problems))


def _for_pair(judgment: Judgment, item: Item) -> Judgment:
    if (judgment.query_id, judgment.doc_id) == (item.query_id, item.doc_id):
        return judgment
    return judgment.model_copy(update={"query_id": item.query_id, "doc_id": item.doc_id})
