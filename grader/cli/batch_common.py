"""What `relgrade regrade` and `relgrade batch` share: LLM and Batch API flags, building the
judge of a stored batch job again, and the batch progress line."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from grader.batch.adapter import LLMBatchJudge
from grader.batch.client import BatchClient
from grader.batch.jobs import BatchOptions, BatchRunner
from grader.batch.requests import MAX_BYTES_PER_FILE, MAX_REQUESTS_PER_FILE
from grader.batch.state import Job
from grader.cli.grade import DEFAULT_MODEL, NO_KEY, _api_key
from grader.cost import PriceTable
from grader.errors import InputError
from grader.judges.llm.judge import LLMJudge
from grader.prompts import OUTPUT_MODES, PromptSpec, load_prompt
from grader.store.store import Store
from grader.store.writer import StoreWriter


def add_llm_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--base-url", metavar="URL", help="OpenAI-compatible endpoint")
    p.add_argument("--concurrency", type=int, default=8, metavar="N", help="requests at once (8)")
    p.add_argument("--rpm", type=float, help="requests per minute limit (live requests)")
    p.add_argument("--tpm", type=float, help="tokens per minute limit (live requests)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per request (60)")
    p.add_argument("--max-attempts", type=int, default=4, help="attempts per pair (4)")
    p.add_argument("--prices", metavar="TOML", help="price table (USD per 1M tokens)")
    p.add_argument("--quiet", action="store_true", help="no progress output")


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


def base_url(args: argparse.Namespace) -> str | None:
    return args.base_url or os.environ.get("OPENAI_BASE_URL") or None


class JudgeFactory:
    """Builds LLM judges from the flags, and the judge of a stored job from its config."""

    def __init__(self, args: argparse.Namespace, writer: StoreWriter) -> None:
        self.args = args
        self.writer = writer
        self.base_url = base_url(args)
        self.key = _api_key(self.base_url, dry_run=bool(getattr(args, "dry_run", False)))
        self.secrets = [] if self.key == NO_KEY else [self.key]
        self.prices = PriceTable.load(getattr(args, "prices", None))
        self._jobs: dict[str, LLMBatchJudge] = {}
        self.made: list[LLMJudge] = []

    def llm(self, model: str, prompt: PromptSpec) -> LLMJudge:
        limiter = None
        if self.args.rpm or self.args.tpm:
            from grader.judges.llm.ratelimit import RateLimiter

            limiter = RateLimiter(self.args.rpm, self.args.tpm)
        judge = LLMJudge(
            model=model,
            prompt=prompt,
            base_url=self.base_url,
            api_key=self.key,
            timeout=self.args.timeout,
            max_attempts=self.args.max_attempts,
            limiter=limiter,
            prices=self.prices,
            on_call=self.writer.log_call,
        )
        self.made.append(judge)
        return judge

    def remember(self, config: dict[str, Any], judge: LLMBatchJudge) -> None:
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
            self.llm(str(config["model"]), spec),
            mode=mode if mode in OUTPUT_MODES else None,
        )
        if judge.fingerprint() != config.get("fingerprint"):
            raise InputError(
                "the judge rebuilt for a stored batch job does not match the one that sent it",
                hint="use the relgrade version that submitted the batch",
            )
        self._jobs[cache_key] = judge
        return judge

    async def aclose(self) -> None:
        for judge in self.made:
            await judge.aclose()


def job_config(judge: LLMBatchJudge, prompt_arg: str) -> dict[str, Any]:
    """What a job records to rebuild its judge in another process."""
    spec = judge.live.prompt
    return {
        "judge_id": judge.judge_id,
        "model": judge.live.model,
        "prompt": prompt_arg,
        "prompt_path": str(Path(spec.source).resolve()),
        "prompt_id": spec.id,
        "prompt_sha": spec.sha256,
        "mode": judge.mode,
        "fingerprint": judge.fingerprint(),
    }


def default_model() -> str:
    return os.environ.get("RELGRADE_MODEL") or DEFAULT_MODEL


def make_runner(store: Store, args: argparse.Namespace, factory: JudgeFactory) -> BatchRunner:
    if args.batch_max_requests < 1 or args.batch_max_bytes < 1:
        raise InputError("--batch-max-requests and --batch-max-bytes must be positive")
    client = BatchClient(base_url=factory.base_url, api_key=factory.key, timeout=args.timeout)
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
