"""The Batch API through the official `openai` SDK: upload, create (24h window), retrieve, find by
input file, download. The SDK's retries are off; the project's retry policy
(`grader.judges.llm.retry`) retries transient errors. `timeout` bounds each whole small call;
uploads get a second more per MiB, downloads one per 256 KiB received
(`grader.judges.llm.client`). An upload or create answered 404/405/501 is `NoBatchAPI`."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import openai
from openai import AsyncOpenAI
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from grader import defaults
from grader.errors import JudgeError, NoBatchAPI
from grader.judges.llm.client import UPLOAD_BYTES_PER_S, BoundedHTTPClient
from grader.judges.llm.endpoint import BASE_URL_ENV, KEY_ENV, api_key_for, env_key_for
from grader.judges.llm.retry import RetryPolicy, retry_delay, should_retry, status_of
from grader.judges.llm.transport import deadline
from grader.redact import redact_url

T = TypeVar("T")

TERMINAL_STATUSES = frozenset({"completed", "failed", "expired", "cancelled"})
NO_BATCH_API_STATUSES = frozenset({404, 405, 501})  # an upload or create without a Batch API


def poll_delays(initial: float = 5.0, factor: float = 1.5, cap: float = 120.0) -> Iterator[float]:
    """Seconds to wait before each successive status check: initial, x factor, ..., never > cap."""
    delay = initial
    while True:
        yield min(delay, cap)
        delay = min(delay * factor, cap)


@dataclass(frozen=True)
class BatchInfo:
    """What relgrade needs from a Batch object."""

    id: str
    status: str
    input_file_id: str
    output_file_id: str | None
    error_file_id: str | None
    total: int
    completed: int
    failed: int


def _info(batch: Any) -> BatchInfo:
    counts = getattr(batch, "request_counts", None)
    n = [int(getattr(counts, k, 0) or 0) for k in ("total", "completed", "failed")]
    files = (batch.input_file_id, batch.output_file_id, batch.error_file_id)
    return BatchInfo(batch.id, batch.status, *files, *n)


class BatchClient:
    """A thin, retrying wrapper over `client.files` and `client.batches`."""

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        client: AsyncOpenAI | None = None,
        timeout: float = defaults.BATCH_TIMEOUT_S,
        policy: RetryPolicy | None = None,
    ) -> None:
        if client is None:
            url = base_url or os.environ.get(BASE_URL_ENV) or None
            key = api_key_for(url, api_key or env_key_for(url, os.environ.get(KEY_ENV)))
            client = AsyncOpenAI(
                base_url=base_url,
                api_key=key,
                max_retries=0,
                timeout=timeout,
                http_client=BoundedHTTPClient(),
            )
        self.client = client
        self.policy = policy or RetryPolicy()
        self.timeout = timeout

    @property
    def base_url(self) -> str:
        """The endpoint this client talks to."""
        return str(self.client.base_url)

    async def _call(
        self,
        what: str,
        fn: Callable[[], Awaitable[T]],
        *,
        seconds: float | None,
        method: str = "GET",
    ) -> T:
        """`fn` with the retry policy, each attempt bounded by `seconds` as a whole (None: by
        the SDK's per-read timeout only)."""
        policy = self.policy
        url = str(self.client.base_url)

        async def bounded() -> T:
            async with deadline(seconds, method, url):
                return await fn()

        def wait(state: RetryCallState) -> float:
            exc = state.outcome.exception() if state.outcome else None
            return 0.0 if exc is None else retry_delay(exc, state.attempt_number, policy)

        retrying = AsyncRetrying(
            stop=stop_after_attempt(policy.max_attempts),
            wait=wait,
            retry=retry_if_exception(should_retry),
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    return await bounded()
        except openai.OpenAIError as exc:
            status = status_of(exc)
            if what in ("upload", "create") and status in NO_BATCH_API_STATUSES:
                raise NoBatchAPI(
                    f"{redact_url(url).rstrip('/')}: this server has no Batch API; drop --batch "
                    f"to regrade concurrently (its {what} answered {status})"
                ) from exc
            raise JudgeError(f"Batch API {what} failed: {type(exc).__name__}: {exc}") from exc
        raise AssertionError("unreachable")  # pragma: no cover

    async def upload(self, content: bytes, *, filename: str) -> str:
        """Upload one JSONL input file with purpose "batch"; return its file id."""
        created = await self._call(
            "upload",
            lambda: self.client.files.create(
                file=(filename, content, "application/jsonl"), purpose="batch"
            ),
            seconds=self.timeout + len(content) / UPLOAD_BYTES_PER_S,
            method="POST",
        )
        return str(created.id)

    async def create(self, input_file_id: str, *, metadata: dict[str, str]) -> BatchInfo:
        """Create a chat.completions batch over an uploaded file with the 24h window."""
        batch = await self._call(
            "create",
            lambda: self.client.batches.create(
                completion_window="24h",
                endpoint="/v1/chat/completions",
                input_file_id=input_file_id,
                metadata=metadata,
            ),
            seconds=self.timeout,
            method="POST",
        )
        return _info(batch)

    async def retrieve(self, batch_id: str) -> BatchInfo:
        """The batch's current status and counts."""
        batch = self.client.batches.retrieve
        return _info(await self._call("status", lambda: batch(batch_id), seconds=self.timeout))

    async def find_by_input_file(
        self, input_file_id: str, *, max_scan: int = 1000
    ) -> BatchInfo | None:
        """A batch already created from `input_file_id`, if any, among the newest `max_scan`
        (resume after a crash between creating the batch and recording its id)."""

        async def scan() -> BatchInfo | None:
            seen = 0
            async for batch in self.client.batches.list(limit=100):
                if batch.input_file_id == input_file_id:
                    return _info(batch)
                seen += 1
                if seen >= max_scan:  # the batch sought would be among the newest
                    break
            return None

        pages = -(-max_scan // 100)  # the scan may read up to this many pages of 100
        return await self._call("list", scan, seconds=self.timeout * pages)

    async def download(self, file_id: str) -> bytes:
        """The content of an output or error file."""

        async def fetch() -> bytes:
            response = await self.client.files.content(file_id)
            return bytes(response.content)

        return await self._call("download", fetch, seconds=None)

    async def close(self) -> None:
        await self.client.close()
