"""What `relgrade regrade` and `relgrade batch` share: Batch API flags, the judges built
from the command's `Settings` (and rebuilt for stored batch jobs), and the batch progress line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from grader.batch.adapter import LLMBatchJudge
from grader.batch.api.jobs import BatchOptions, BatchRunner
from grader.batch.api.state import Job
from grader.batch.job_config import JobJudges
from grader.batch.requests import MAX_BYTES_PER_FILE, MAX_REQUESTS_PER_FILE
from grader.errors import InputError
from grader.job.endpoint import Settings
from grader.job.judges import build_judges
from grader.judges.base import Judge
from grader.judges.llm.judge import LLMJudge
from grader.judges.registry import JudgeSettings
from grader.prompts import PromptSpec
from grader.store.store import Store
from grader.store.writer import StoreWriter


def add_batch_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--batch-max-requests",
        type=int,
        default=MAX_REQUESTS_PER_FILE,
        metavar="N",
        help=f"requests per batch ({MAX_REQUESTS_PER_FILE:,}, the API's limit)",
    )
    p.add_argument(
        "--batch-max-bytes",
        type=int,
        default=MAX_BYTES_PER_FILE,
        metavar="BYTES",
        help="bytes per batch input file (200 MB, the API's limit)",
    )
    p.add_argument(
        "--poll-interval", type=float, default=5.0, metavar="S", help="first wait between checks"
    )
    p.add_argument(
        "--poll-max", type=float, default=120.0, metavar="S", help="longest wait between checks"
    )
    p.add_argument(
        "--no-live-retry",
        action="store_true",
        help="mark lines the batch could not grade as failed instead of asking them live",
    )


class JudgeFactory:
    """Builds LLM judges from the command's `Settings`, and the judge of a stored job from its
    configuration (`grader.batch.job_config`)."""

    def __init__(
        self, args: argparse.Namespace, writer: StoreWriter, *, offline: bool = False
    ) -> None:
        """`offline`: the judges call no server, so no key is resolved (none may be set)."""
        self.args = args
        self.writer = writer
        self.settings = Settings.from_args(args)
        self.key = None if offline else self.settings.key
        self.secrets = [] if offline else self.settings.secrets
        self.prices = self.settings.prices
        self.jobs = JobJudges(self.llm)
        self.made: list[LLMJudge] = []

    def llm(self, model: str, prompt: PromptSpec) -> LLMJudge:
        judge = self.settings.llm_judge(model, prompt, on_call=self.writer.log_call)
        self.made.append(judge)
        return judge

    def judges(self, prompt: PromptSpec, models: Sequence[str]) -> list[Judge]:
        """The judges --judge asks for (one per model for an LLM judge), from the registry."""
        base = JudgeSettings(prompt=prompt, endpoint=self.settings, on_call=self.writer.log_call)
        made = build_judges(self.args, base, models)
        self.made += [judge for judge in made if isinstance(judge, LLMJudge)]
        return made

    def remember(self, config: dict[str, Any], judge: LLMBatchJudge) -> None:
        self.jobs.remember(config, judge)

    def for_job(self, config: dict[str, Any]) -> LLMBatchJudge:
        """The judge a stored job was submitted with, checked against its fingerprint."""
        return self.jobs.for_job(config)

    async def aclose(self) -> None:
        for judge in self.made:
            await judge.aclose()


def make_runner(store: Store, args: argparse.Namespace, factory: JudgeFactory) -> BatchRunner:
    if args.batch_max_requests < 1 or args.batch_max_bytes < 1:
        raise InputError("--batch-max-requests and --batch-max-bytes must be positive")
    client = factory.settings.batch_client()
    options = BatchOptions(
        max_requests=args.batch_max_requests,
        max_bytes=args.batch_max_bytes,
        poll_initial=max(0.0, args.poll_interval),
        poll_cap=max(args.poll_interval, args.poll_max),
        live_retry=not args.no_live_retry,
        concurrency=args.concurrency,
    )
    return BatchRunner(store, client, options=options)


def progress_printer(quiet: bool) -> Any:
    """A callback printing one line per poll about the open jobs, on stderr."""

    def show(jobs: Sequence[Job]) -> None:
        if quiet:
            return
        parts = []
        for job in jobs:
            done = job.n_completed + job.n_failed
            status = job.remote_status or job.phase
            parts.append(f"job {job.job_id} {status} {done}/{job.n_requests}")
        print("batch: " + "; ".join(parts), file=sys.stderr, flush=True)

    return show
