"""The LLM judge: one validated 0..3 grade per (query, document) from any OpenAI-compatible server.

The SDK's own retries are off: `grader.judges.llm.retry` decides, every attempt goes to `on_call`,
and after the last one the judgment is `failed`, never a grade. 401/403/404 raise `JudgeError`; a
server that stops answering raises `ServerNotAnswering`. Several servers share the work.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import Any

import openai
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception

from grader import defaults
from grader.cost import PriceTable, estimate_usage, expected_reply_tokens
from grader.judges.llm.attempts import (
    MODE_REJECTED,
    RESEND_KINDS,
    AttemptSender,
    EndpointPool,
    ModeRejected,
)
from grader.judges.llm.client import make_clients
from grader.judges.llm.context import ContextFit, DocumentDoesNotFit, ServerInfo, learn_server
from grader.judges.llm.endpoint import is_loopback
from grader.judges.llm.replies import InvalidReply
from grader.judges.llm.results import CallState, JudgmentRecorder
from grader.judges.llm.retry import (
    RateLimiter,
    RetryPolicy,
    is_context_exceeded,
    retry_delay,
    should_retry,
)
from grader.judges.llm.server_settings import ModeSwitch, ServerSettings
from grader.judges.llm.transport import DEAD_AFTER, SAME_FAILURE_S, InFlight, ServerHealth
from grader.models import CallRecord, Doc, Judgment, Query, Usage
from grader.prompts import OutputMode, PromptSpec, load_prompt


class LLMJudge:
    """A Judge backed by a chat model on an OpenAI-compatible server (see module docstring)."""

    def __init__(
        self,
        *,
        model: str,
        prompt: PromptSpec | str,
        base_url: str | Sequence[str] | None = None,
        api_key: str | Sequence[str | None] | None = None,
        client: openai.AsyncOpenAI | None = None,
        timeout: float = defaults.TIMEOUT_S,
        max_attempts: int | None = None,
        policy: RetryPolicy | None = None,
        limiter: RateLimiter | None = None,
        prices: PriceTable | None = None,
        on_call: Callable[[CallRecord], None] | None = None,
        output_mode: OutputMode = "json_schema",
        on_switch: Callable[[ModeSwitch], None] | None = None,
        sleep: Callable[[float], Any] = asyncio.sleep,
        dead_after: int = DEAD_AFTER,
        unreachable_after: int | None = 2,
        max_context: int | None = None,
        probe_server: bool = False,
        on_notice: Callable[[str], None] | None = None,
        max_reply_bytes: int | None = None,
    ) -> None:
        self.model = model
        self.prompt = load_prompt(prompt) if isinstance(prompt, str) else prompt
        self.policy = policy or RetryPolicy()
        if max_attempts is not None:
            self.policy = dataclasses.replace(self.policy, max_attempts=max_attempts)
        # Without limits, still one shared limiter: a 429 then pauses every worker of this judge.
        self.limiter = limiter if limiter is not None else RateLimiter()
        self.prices = prices
        self.on_call = on_call
        self.timeout = timeout
        self.server = ServerSettings(
            output_mode, logprobs=self.prompt.logprobs, on_switch=on_switch
        )
        self._sleep = sleep
        self.fit = ContextFit(self.prompt, max_context)
        self.server_info: ServerInfo | None = None
        self._probe = asyncio.Lock() if probe_server else None
        self._on_notice = on_notice
        self.abandoned = Usage()
        """Tokens of answered attempts of judgments cut short (Ctrl-C): paid, in no judgment."""
        made = make_clients(base_url, api_key, client, timeout, max_reply_bytes)
        self._open(made, (dead_after, unreachable_after))

    def _open(
        self, made: list[tuple[openai.AsyncOpenAI, tuple[str, ...]]], health: tuple[int, int | None]
    ) -> None:
        """The recorder (without `on_call`, the reply reader) and the pool of servers."""
        self._recorder = JudgmentRecorder(
            judge_id=self.judge_id,
            model=self.model,
            prompt=self.prompt,
            prices=self.prices,
            on_call=self.on_call,
            secrets=tuple(s for _, secrets in made for s in secrets),
        )
        self.reader = dataclasses.replace(self._recorder, on_call=None)
        """How this judge reads a reply body obtained elsewhere (a batch line): picklable."""
        senders = [  # one a server, each with its own health and in-flight bound
            AttemptSender(
                client=client,
                server=self.server,
                fit=self.fit,
                limiter=self.limiter,
                health=ServerHealth(*health, quiet_s=self.timeout, same_for_s=SAME_FAILURE_S),
                inflight=InFlight(self._on_notice, timeout=self.timeout),
                recorder=self._recorder,
                policy=self.policy,
                timeout=self.timeout,
            )
            for client, _ in made
        ]
        self.pool = EndpointPool(senders, self._on_notice)
        self.client = self.pool.members[0].client
        """The first server's (the only one, mostly); `pool` has every server's."""

    def local(self) -> bool:
        """Whether the model is served on this machine (every server a loopback address)."""
        return all(is_loopback(m.base_url) for m in self.pool.members)

    def cached_reported(self) -> bool:
        """Whether any reply this run said its cached prompt tokens (`AttemptSender`)."""
        return any(m.cached_reported for m in self.pool.members)

    def answers_by_server(self) -> dict[str, int]:
        """Replies (status 200) per server this run, by URL without credentials."""
        return {m.name: m.answers for m in self.pool.members}

    @property
    def judge_id(self) -> str:
        return f"openai:{self.model}"

    @property
    def output_mode(self) -> OutputMode:
        """The output mode this run uses now (after any fallback)."""
        return self.server.mode

    def fingerprint(self) -> dict[str, Any]:
        return {
            "judge": self.judge_id,
            "model": self.model,
            "prompt": self.prompt.sha256,
            "sampling": self.prompt.sampling(),
        }

    def build_request(
        self, query: Query, doc: Doc, *, mode: OutputMode | None = None
    ) -> dict[str, Any]:
        """The chat.completions body for one pair in `mode` (default: the run's), as batch too."""
        mode = mode or self.server.mode
        messages, _ = self.fit.messages(query, doc, mode)
        return self.server.body(self.prompt, self.model, messages, mode)

    def estimate_cost(
        self, query: Query, doc: Doc, *, batch: bool = False, completion_tokens: int | None = None
    ) -> float | None:
        """Estimated USD of grading this pair once (None without a price; --dry-run, --max-cost):
        the reply at the prompt's `max_tokens` unless `completion_tokens` is given."""
        if self.prices is None:
            return None
        usage = self.estimate(query, doc, completion_tokens=completion_tokens)
        return self.prices.cost(self.model, usage, batch=batch)

    def estimate(self, query: Query, doc: Doc, *, completion_tokens: int | None = None) -> Usage:
        """The tokens of grading this pair once (--dry-run): the prompt's, and the reply at the
        prompt's `max_tokens` unless `completion_tokens` is given."""
        usage = estimate_usage(self.build_request(query, doc)["messages"], self.prompt.max_tokens)
        if completion_tokens is not None:
            usage = usage.model_copy(update={"completion_tokens": completion_tokens})
        return usage

    def expected_completion_tokens(self) -> int:
        """The completion tokens of the reply the prompt's schema asks for, before any is stored."""
        return expected_reply_tokens(self.prompt.schema, self.prompt.max_tokens)

    async def aclose(self) -> None:
        for member in self.pool.members:
            await member.client.close()

    async def judge(self, query: Query, doc: Doc, *, key: str) -> Judgment:
        """Grade one pair: ok, or failed with the reason; raises JudgeError only when fatal."""
        started = time.perf_counter()
        if self._probe is not None:  # the server's `/v1/models`, read once
            async with self._probe:
                if self.server_info is None:
                    self.server_info = await learn_server(
                        self.client, self.model, self.fit, self._on_notice, self.timeout
                    )
        state = CallState(query, doc, key, self.server.mode, [], True)
        retrying = AsyncRetrying(
            retry=retry_if_exception(self._retryable),
            stop=lambda rs: self._stop(state, rs),
            wait=lambda rs: self._wait(state, rs),
            sleep=self._sleep,
            reraise=True,
        )
        try:
            state.messages, state.truncated = self.fit.messages(query, doc, state.mode)
            async for attempt in retrying:
                with attempt:
                    reply = await self.pool.send(state)
        except asyncio.CancelledError:
            self.abandoned = self.abandoned + state.usage  # answered attempts are paid for
            raise
        except (DocumentDoesNotFit, InvalidReply, openai.APIError, ModeRejected) as exc:
            return self._failed(state, exc, started)
        self.server.judged(state.mode, valid=True)
        return self._recorder.ok(state, reply, started)

    def _failed(self, state: CallState, exc: Exception, started: float) -> Judgment:
        """The failed judgment after the last attempt's `exc`; raises if every server is dead."""
        if isinstance(exc, DocumentDoesNotFit):  # permanent, as is: never a grade
            return self._recorder.failed(state, "ContextLengthExceeded", str(exc), started)
        if isinstance(exc, InvalidReply):
            self.server.judged(state.mode, valid=False)
            message = f"{exc.kind}: {exc.message}"
            return self._recorder.failed(state, "InvalidReply", message, started)
        if self.pool.dead and isinstance(exc, openai.APIConnectionError):
            raise self.pool.not_answering() from exc
        message = self._recorder.message(exc)
        transport = not isinstance(exc, openai.APIStatusError) or should_retry(exc)
        if state.invalid is not None and isinstance(exc, openai.APIError) and transport:
            # the model answered invalidly, then the last attempt failed in transport
            state.last_raw = state.invalid.raw
            message = f"{state.invalid.kind}: {state.invalid.message} (then: {message})"
            return self._recorder.failed(state, "InvalidReply", message, started)
        kind = MODE_REJECTED if isinstance(exc, ModeRejected) else type(exc).__name__
        if isinstance(exc, openai.APIStatusError):
            body = self._recorder.redact(exc.response.text[:2000])
            state.last_raw = body or state.last_raw
            if exc.code == "context_length_exceeded" or is_context_exceeded(body or message):
                kind = "ContextLengthExceeded"  # permanent: the same prompt never fits
        return self._recorder.failed(state, kind, message, started)

    def take_abandoned(self) -> tuple[Usage, float | None]:
        """The tokens and cost of answered attempts of judgments cut short since the last call."""
        usage, self.abandoned = self.abandoned, Usage()
        return usage, self._recorder.cost(usage, False)

    def _retryable(self, exc: BaseException) -> bool:
        if self.pool.dead and isinstance(exc, openai.APIConnectionError):
            return False  # judge() raises ServerNotAnswering: no backoff, no more requests
        return isinstance(exc, InvalidReply | ModeRejected) or should_retry(exc)

    def _stop(self, state: CallState, rs: RetryCallState) -> bool:
        exc = rs.outcome.exception() if rs.outcome is not None else None
        if not isinstance(exc, ModeRejected):
            state.counted += 1
        if state.counted >= self.policy.max_attempts:
            return True
        return isinstance(exc, InvalidReply) and state.reasks > self.policy.max_reasks

    def _wait(self, state: CallState, rs: RetryCallState) -> float:
        exc = rs.outcome.exception() if rs.outcome is not None else None
        if isinstance(exc, ModeRejected):
            return 0.0
        if isinstance(exc, InvalidReply) and exc.kind not in RESEND_KINDS:
            return 0.0
        state.transient += 1
        if exc is None:  # pragma: no cover - tenacity waits only after a failure
            return 0.0
        return retry_delay(exc, state.transient, self.policy)
