"""Which server `batch status|collect` talk to (the one stored with the jobs, without
credentials), and the commands printed to follow a batch."""

from __future__ import annotations

import argparse
import shlex
import sys

from grader.batch.api.state import BatchState
from grader.errors import InputError
from grader.redact import redact_url


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
    print(
        f"endpoint {redact_url(url)} (stored with the batch jobs; --base-url to change)",
        file=sys.stderr,
    )


def batch_command(action: str, store: str, api_key_env: str | None = None) -> str:
    """`relgrade batch ACTION --store STORE`, quoted to paste; the key's variable is named when
    it is not the default one (the endpoint is in the store)."""
    words = ["relgrade", "batch", action, "--store", store]
    if api_key_env:
        words += ["--api-key-env", api_key_env]
    return shlex.join(words)
