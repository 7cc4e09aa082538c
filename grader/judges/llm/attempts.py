"""One HTTP attempt of a judgment: send the request, read the reply, record the call.

`AttemptSender.send` waits for the rate limiter and a turn in flight, sends under the deadline,
reads the reply into a grade and records the call, keeping the run's shared state (health, in-flight
bound, output mode: `ModeRejected` means resend). What to do next is the retry loop's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import openai

from grader.cost import estimate_usage
from grader.errors import JudgeError, ServerNotAnswering
from grader.judges.llm.bounded_http import too_large
from grader.judges.llm.connect_errors import connect_failure, connection_message
from grader.judges.llm.context import ContextFit
from grader.judges.llm.inflight import InFlight
from grader.judges.llm.ratelimit import RateLimiter
from grader.judges.llm.replies import (
    GradeReply,
    InvalidReply,
    parse_body,
    parse_completion,
    reports_cached,
)
from grader.judges.llm.results import CallState, JudgmentRecorder
from grader.judges.llm.retry import (
    RetryPolicy,
    is_context_exceeded,
    is_fatal,
    retry_delay,
    should_retry,
)
from grader.judges.llm.server_settings import ServerSettings
from grader.judges.llm.transport import ServerHealth, deadline, not_answering
from grader.judges.llm.types import sdk_arguments
from grader.models import Usage
from grader.prompts import OutputMode, PromptSpec, render_reask
from grader.redact import redact_url

RESEND_KINDS = frozenset({"not_json_body", "no_choice"})
"""Invalid replies that are the server's fault, not the model's: resent as they were, after a
backoff, rather than re-asked."""


class ModeRejected(Exception):
    """The server refused this request's output mode or a parameter; resend without it."""


MODE_REJECTED = "_ModeRejected"
"""The error type a judgment that fails by a `ModeRejected` records (as stored judgments hold
it; `grader.judges.failures` reads it)."""


@dataclass
class AttemptSender:
    """Sends the attempts of one judge's judgments (module docstring); the objects it holds
    are the judge's own, shared by every worker."""

    client: openai.AsyncOpenAI
    model: str
    prompt: PromptSpec
    server: ServerSettings
    fit: ContextFit
    limiter: RateLimiter
    health: ServerHealth
    inflight: InFlight
    recorder: JudgmentRecorder
    policy: RetryPolicy
    timeout: float
    base_url: str
    cached_reported: bool = False
    """Whether any reply said how many prompt tokens came from the server's cache (llama.cpp's
    server does not): a summary says "cached not reported" rather than "cached 0"."""

    async def send(self, state: CallState) -> GradeReply:
        """One attempt of the judgment `state` describes: its valid reply, or the error."""
        if state.mode != self.server.mode:  # another worker switched the mode: start over in it
            state.mode = self.server.mode
            state.messages, state.truncated = self.fit.messages(state.query, state.doc, state.mode)
        mode = state.mode
        body = self.server.body(self.prompt, self.model, state.messages, mode)
        state.attempts += 1
        estimated = 0
        if self.limiter.tpm:
            estimated = estimate_usage(body["messages"], self.prompt.max_tokens).prompt_tokens
            estimated += self.prompt.max_tokens
        await self.limiter.acquire(estimated)
        if self.health.dead:  # another worker found the server not answering: send nothing
            raise self.not_answering()
        try:
            # --timeout bounds the whole request, not each socket read (.transport); the
            # request's turn among those in flight comes first, outside it (.inflight)
            async with self.inflight as ticket:
                t0 = time.perf_counter()
                try:
                    async with deadline(self.timeout, "POST", self.chat_url) as bound:
                        ticket.bound = bound
                        raw = await self.client.chat.completions.with_raw_response.create(
                            **sdk_arguments(body),
                            timeout=self.inflight.longest(ticket) or self.timeout,
                        )
                        text = raw.http_response.text
                except openai.APITimeoutError:
                    self.inflight.timed_out(ticket.sent)
                    raise
                except openai.APIStatusError:
                    self.inflight.answered(ticket)
                    raise
                finally:
                    self.inflight.done(ticket)
                self.inflight.answered(ticket)
        except openai.APIStatusError as exc:
            self.health.answered()
            await self._on_status_error(state, exc, body, t0)
            raise
        except openai.APIError as exc:
            self._on_transport_error(state, exc, t0)
            raise
        self.health.answered()
        self.health.succeeded()
        return self._read(state, text, mode, estimated, t0)

    def _read(
        self, state: CallState, text: str, mode: OutputMode, estimated: int, t0: float
    ) -> GradeReply:
        """The grade of a 200 reply's `text`; for an invalid one, the re-ask is added to the
        judgment's messages (unless the server is at fault) and InvalidReply raised."""
        try:
            body = parse_body(text)
            self.cached_reported = self.cached_reported or reports_cached(body)
            reply = parse_completion(body, mode=mode, spec=self.prompt)
        except InvalidReply as exc:
            state.usage = state.usage + exc.usage
            state.last_raw = exc.raw
            state.invalid = exc
            self.recorder.record(state, "invalid", t0, exc.usage, exc=exc, status=200)
            self.limiter.settle(estimated, exc.usage.prompt_tokens + exc.usage.completion_tokens)
            if exc.kind not in RESEND_KINDS:
                state.reasks += 1
                state.messages = [
                    *state.messages,
                    {"role": "assistant", "content": exc.raw or ""},
                    {"role": "user", "content": render_reask(self.prompt, exc.message)},
                ]
            raise
        state.usage = state.usage + reply.usage
        state.last_raw = reply.raw
        self.limiter.settle(estimated, reply.usage.prompt_tokens + reply.usage.completion_tokens)
        self.recorder.record(state, "ok", t0, reply.usage, status=200)
        return reply

    @property
    def chat_url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    def not_answering(self) -> ServerNotAnswering:
        """The error that stops the run: the server is not answering."""
        return not_answering(self.base_url, self.health, self.timeout, self.recorder.redact)

    def _on_transport_error(self, state: CallState, exc: openai.APIError, t0: float) -> None:
        """Record a failure without an HTTP answer; raise ServerNotAnswering when it makes the
        server not answering (`ServerHealth`)."""
        self.recorder.record(state, "retry", t0, Usage(), exc=exc)
        large = too_large(exc)
        if large is not None:  # the server answered, too much: the same failure, maybe again
            self.health.answered()
            if self.health.same_failure(str(large), state.key, "the read stopped there"):
                raise self.not_answering() from exc
            return
        if isinstance(exc, openai.APIConnectionError):
            dead = self.health.failed(timed_out=isinstance(exc, openai.APITimeoutError))
            cause = connect_failure(exc)
            if cause is not None:
                dead = self.health.could_not_connect(cause) or dead
            elif not isinstance(exc, openai.APITimeoutError):
                self.health.dropped_before_answer(connection_message(exc))
            if dead:
                raise self.not_answering() from exc

    async def _on_status_error(
        self, state: CallState, exc: openai.APIStatusError, body: dict[str, Any], t0: float
    ) -> None:
        """Record an HTTP error answer: JudgeError when it dooms every request, ModeRejected
        when the server refused something the run can do without, a 429's pause."""
        if is_fatal(exc):
            self.recorder.record(state, "fatal", t0, Usage(), exc=exc)
            hint = (
                "the account's quota is used up: check its billing"
                if exc.status_code == 429
                else "check OPENAI_API_KEY, --model and --base-url"
            )
            raise JudgeError(
                f"{redact_url(self.base_url)} answered {exc.status_code} for model {self.model!r}: "
                f"{self.recorder.message(exc)} ({hint})"
            ) from None
        if await self.server.adapt(state.mode, body, self.recorder.message(exc), exc.status_code):
            self.recorder.record(state, "mode_rejected", t0, Usage(), exc=exc)
            raise ModeRejected(self.recorder.message(exc)) from None
        if exc.status_code != 429 and not is_context_exceeded(self.recorder.message(exc)):
            cause = f"HTTP {exc.status_code}"
            if self.health.same_failure(cause, state.key, self.recorder.message(exc)):
                self.recorder.record(state, "retry", t0, Usage(), exc=exc)
                raise self.not_answering() from None
        if should_retry(exc):
            self.recorder.record(state, "retry", t0, Usage(), exc=exc)
            if exc.status_code == 429:
                self.limiter.pause(retry_delay(exc, state.transient + 1, self.policy))
        else:
            self.recorder.record(state, "error", t0, Usage(), exc=exc)
