"""What `relgrade regrade` and `relgrade batch` share: Batch API flags, the store, the judges
built from the command's `Settings` (and rebuilt for stored batch jobs), progress lines, which
server `batch status|collect` talk to, and the commands printed to follow a batch."""

from __future__ import annotations

import argparse
import shlex
import time
from collections.abc import Sequence

from grader.batch.adapter import JobJudges
from grader.batch.api.jobs import BatchOptions, BatchRunner, Progress
from grader.batch.api.state import BatchState, Job
from grader.batch.files.export_files import LineProgress
from grader.batch.requests import MAX_BYTES_PER_FILE, MAX_REQUESTS_PER_FILE
from grader.cli.stderr import say
from grader.errors import InputError
from grader.job.endpoint import Settings
from grader.job.judges import build_judges
from grader.judges.base import Judge
from grader.judges.llm.judge import LLMJudge
from grader.judges.registry import JudgeSettings
from grader.prompts import PromptSpec
from grader.redact import redact_url
from grader.store.store import Store
from grader.store.writer import StoreWriter


def add_batch_limits(p: argparse.ArgumentParser, per: str, note: str = "") -> None:
    """--batch-max-requests and --batch-max-bytes: lines and bytes per `per`."""
    p.add_argument(
        "--batch-max-requests",
        type=int,
        default=MAX_REQUESTS_PER_FILE,
        metavar="N",
        help=f"requests per {per} ({MAX_REQUESTS_PER_FILE:,}{note})",
    )
    p.add_argument(
        "--batch-max-bytes",
        type=int,
        default=MAX_BYTES_PER_FILE,
        metavar="BYTES",
        help=f"bytes per {per} (200 MB{note})",
    )


def add_batch_options(p: argparse.ArgumentParser) -> None:
    add_batch_limits(p, "batch", ", the API's limit")
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


class JudgeFactory(JobJudges):
    """Builds LLM judges from the command's `Settings`, and the judge of a stored job from its
    configuration (`offline`: they call no server, so no key is resolved)."""

    def __init__(
        self, args: argparse.Namespace, writer: StoreWriter, *, offline: bool = False
    ) -> None:
        super().__init__(self.llm)
        self.args = args
        self.writer = writer
        self.settings = Settings.from_args(args)
        self.key = None if offline else self.settings.key
        self.secrets = [] if offline else self.settings.secrets
        self.prices = self.settings.prices
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

    async def aclose(self) -> None:
        for judge in self.made:
            await judge.aclose()


def make_runner(store: Store, args: argparse.Namespace, factory: JudgeFactory) -> BatchRunner:
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


def progress_printer(quiet: bool) -> Progress | None:
    """A callback printing one line per poll about the open jobs, on stderr (None: `quiet`)."""

    def show(jobs: Sequence[Job]) -> None:
        parts = [
            f"job {j.job_id} {j.remote_status or j.phase} {j.n_completed + j.n_failed}/"
            f"{j.n_requests}"
            for j in jobs
        ]
        say("batch: " + "; ".join(parts))

    return None if quiet else show


class Printer:
    """Progress on stderr, at most one line a second: lines/s and ETA (`pause`: tests only,
    seconds to wait at each call, so a test can kill a real import)."""

    def __init__(self, what: str, quiet: bool, *, pause: float = 0.0) -> None:
        self.what, self.quiet, self.pause = what, quiet, pause
        self.last = 0.0

    def __call__(self, p: LineProgress) -> None:
        if self.pause > 0:
            time.sleep(self.pause)
        now = time.monotonic()
        if self.quiet or now - self.last < 1.0:
            return
        self.last = now
        of = f" of {p.total:,}" if p.total is not None else ""
        if p.fraction is not None:
            of += f" ({p.fraction:.0%})"
        eta = f", ETA {p.eta:,.0f} s" if p.eta is not None else ""
        say(f"{self.what}: {p.lines:,}{of} lines, {p.per_second:,.0f} lines/s{eta}")


def use_stored_base_url(args: argparse.Namespace, state: BatchState) -> None:
    """Without --base-url, set `args.base_url` to the endpoint stored with the open jobs (said on
    stderr); open jobs sent to several endpoints need --base-url (an InputError listing them)."""
    if getattr(args, "base_url", None):
        return
    urls: dict[str, list[int]] = {}
    for job in state.jobs(open_only=True):
        if job.base_url:
            urls.setdefault(job.base_url, []).append(job.job_id)
    if not urls:
        return
    if len(urls) > 1:
        listed = "; ".join(
            f"{redact_url(url)} (jobs {', '.join(map(str, ids))})" for url, ids in urls.items()
        )
        raise InputError(
            f"the open batch jobs were sent to {len(urls)} endpoints: {listed}",
            path=state.path,
            hint="give --base-url to follow the jobs of one of them",
        )
    (url,) = urls
    args.base_url = url
    say(f"endpoint {redact_url(url)} (stored with the batch jobs; --base-url to change)")


def batch_command(action: str, store: str, api_key_env: str | None = None) -> str:
    """`relgrade batch ACTION --store STORE`, quoted to paste; the key's variable is named when
    it is not the default one (the endpoint is in the store)."""
    words = ["relgrade", "batch", action, "--store", store]
    if api_key_env:
        words += ["--api-key-env", api_key_env]
    return shlex.join(words)
