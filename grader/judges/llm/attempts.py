"""One HTTP attempt of a judgment: send the request, read the reply, record the call.

`AttemptSender` keeps one server's share of the run's state (health, in-flight bound, output mode:
`ModeRejected` means resend); an `EndpointPool` sends each attempt to the live server with the
fewest requests in flight, and one that could not connect to another without using up an attempt.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import openai

from grader.cost import estimate_usage
from grader.errors import JudgeError, ServerNotAnswering
from grader.judges.llm.context import ContextFit
from grader.judges.llm.replies import (
    GradeReply,
    InvalidReply,
    parse_body,
    parse_completion,
    reports_cached,
)
from grader.judges.llm.results import CallState, JudgmentRecorder
from grader.judges.llm.retry import (
    RateLimiter,
    RetryPolicy,
    is_context_exceeded,
    is_fatal,
    retry_delay,
    should_retry,
)
from grader.judges.llm.server_settings import ServerSettings
from grader.judges.llm.transport import InFlight, ServerHealth, deadline
from grader.models import Usage
from grader.prompts import OutputMode, render_reask
from grader.redact import redact_url

RESEND_KINDS = frozenset({"not_json_body", "no_choice"})
"""Invalid replies that are the server's fault: resent after a backoff rather than re-asked."""


SDK_ARGS = ("model", "messages")
"""What `chat.completions.create` must be given; the rest of a body goes in `extra_body`, which
the SDK merges into the JSON as is (vLLM's `structured_outputs`, llama.cpp's `repeat_penalty`)."""


class ModeRejected(Exception):
    """The server refused this request's output mode or a parameter; resend without it."""


MODE_REJECTED = "_ModeRejected"
"""The error type of a judgment failed by `ModeRejected` (stored; `grader.judges.failures`)."""


@dataclass(eq=False)
class AttemptSender:
    """Sends one judge's attempts to one server and counts them (its parts are the judge's)."""

    client: openai.AsyncOpenAI
    server: ServerSettings
    fit: ContextFit
    limiter: RateLimiter
    health: ServerHealth
    inflight: InFlight
    recorder: JudgmentRecorder
    policy: RetryPolicy
    timeout: float
    cached_reported: bool = False
    """Whether any reply said its cached prompt tokens (llama.cpp's server does not)."""
    busy: int = 0
    """Attempts on this server now (sent, or waiting for a turn among its requests in flight)."""
    sent: int = 0
    answers: int = 0
    """Replies with a 200 (valid or not): what the server produced for this run."""
    dropped: bool = False
    """Dropped from its pool: dead, or left by the run."""

    @property
    def base_url(self) -> str:
        return str(self.client.base_url)

    @property
    def name(self) -> str:
        """The server's URL as it may be shown (no credentials)."""
        return redact_url(self.base_url).rstrip("/")

    @property
    def dead(self) -> bool:
        return self.dropped or self.health.dead

    async def send(self, state: CallState) -> GradeReply:
        """One attempt of the judgment `state` describes: its valid reply, or the error."""
        if state.mode != self.server.mode:  # another worker switched the mode: start over in it
            state.mode = self.server.mode
            state.messages, state.truncated = self.fit.messages(state.query, state.doc, state.mode)
        mode = state.mode
        prompt = self.recorder.prompt
        body = self.server.body(prompt, self.recorder.model, state.messages, mode)
        state.attempts += 1
        estimated = 0
        if self.limiter.tpm:
            estimated = estimate_usage(body["messages"], prompt.max_tokens).prompt_tokens
            estimated += prompt.max_tokens
        await self.limiter.acquire(estimated)
        if self.health.dead:  # another worker found the server not answering: send nothing
            raise self.not_answering()
        try:
            # --timeout bounds the whole request, not each socket read (.transport); the
            # request's turn among those in flight comes first, outside it (`InFlight`)
            async with self.inflight as ticket:
                t0 = time.perf_counter()
                try:
                    url = self.base_url.rstrip("/") + "/chat/completions"
                    async with deadline(self.timeout, "POST", url) as bound:
                        ticket.bound = bound
                        raw = await self.client.chat.completions.with_raw_response.create(
                            model=body["model"],
                            messages=body["messages"],
                            extra_body={k: v for k, v in body.items() if k not in SDK_ARGS},
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
        except openai.APIError as exc:  # no HTTP answer: stop once the server is dead
            self.recorder.record(state, "retry", t0, Usage(), exc=exc)
            if self.health.transport_failed(exc, state.key):
                raise self.not_answering() from exc
            raise
        self.health.answered(ok=True)
        return self._read(state, text, mode, estimated, t0)

    def _read(
        self, state: CallState, text: str, mode: OutputMode, estimated: int, t0: float
    ) -> GradeReply:
        """The grade of a 200 reply's `text`; for an invalid one, the re-ask is added to the
        judgment's messages (unless the server is at fault) and InvalidReply raised."""
        try:
            body = parse_body(text)
            self.cached_reported = self.cached_reported or reports_cached(body)
            reply = parse_completion(body, mode=mode, spec=self.recorder.prompt)
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
                    {"role": "user", "content": render_reask(self.recorder.prompt, exc.message)},
                ]
            raise
        state.usage = state.usage + reply.usage
        state.last_raw = reply.raw
        self.limiter.settle(estimated, reply.usage.prompt_tokens + reply.usage.completion_tokens)
        self.recorder.record(state, "ok", t0, reply.usage, status=200)
        return reply

    def not_answering(self) -> ServerNotAnswering:
        """The error that stops a run whose server is not answering, saying what to check."""
        url, health, redact = self.name, self.health, self.recorder.redact
        if health.failing is not None:
            return ServerNotAnswering(
                f"{url} keeps failing: the last {health.same} requests, for {len(health.pairs)} "
                f"different pairs, all failed the same way ({redact(health.failing)}), so the run "
                "stopped taking new pairs. The pairs that failed are stored as failed; check the "
                "server, then rerun the same command to retry them and do the rest"
            )
        if health.unreachable is not None and health.dropped is not None:
            return ServerNotAnswering(
                f"{url} stopped answering: the server closed a connection in the middle of a "
                f"request, with no reply ({redact(health.dropped)}), then stopped listening "
                f"(the next {health.unreachable_after} requests could not connect: "
                f"{redact(health.unreachable)}). It probably crashed: see its log. Nothing is "
                "stored as failed. Restart the server, then rerun the same command"
            )
        if health.unreachable is not None:
            return ServerNotAnswering(
                f"{url} is not answering: the first {health.unreachable_after} requests could not "
                f"connect ({redact(health.unreachable)}) and nothing has answered, so the run "
                "stopped at once. Nothing is stored as failed. Check the address (--base-url or "
                "OPENAI_BASE_URL) and that the server is up there, then rerun the same command"
            )
        return ServerNotAnswering(
            f"{url} is not answering: {health.threshold} requests in a row timed out (no "
            f"complete reply within {self.timeout:g} s) or could not connect, with no answer in "
            "between, so the run stopped. Every answer received is stored; the pairs cut short "
            "are not marked failed. Check that the server is up at that address (--base-url, "
            "--timeout), then rerun the same command to do the rest"
        )

    async def _on_status_error(
        self, state: CallState, exc: openai.APIStatusError, body: dict[str, Any], t0: float
    ) -> None:
        """Record an HTTP error answer: JudgeError when it dooms every request, ModeRejected
        when the server refused something the run can do without, a 429's pause."""
        message = self.recorder.message(exc)
        if is_fatal(exc):
            self.recorder.record(state, "fatal", t0, Usage(), exc=exc)
            hint = (
                "the account's quota is used up: check its billing"
                if exc.status_code == 429
                else "check OPENAI_API_KEY, --model and --base-url"
            )
            raise JudgeError(
                f"{redact_url(self.base_url)} answered {exc.status_code} for model "
                f"{self.recorder.model!r}: {message} ({hint})"
            ) from None
        if await self.server.adapt(state.mode, body, message, exc.status_code):
            self.recorder.record(state, "mode_rejected", t0, Usage(), exc=exc)
            raise ModeRejected(message) from None
        if (
            exc.status_code != 429
            and not is_context_exceeded(message)
            and self.health.same_failure(f"HTTP {exc.status_code}", state.key, message)
        ):
            self.recorder.record(state, "retry", t0, Usage(), exc=exc)
            raise self.not_answering() from None
        retry = should_retry(exc)
        self.recorder.record(state, "retry" if retry else "error", t0, Usage(), exc=exc)
        if retry and exc.status_code == 429:
            self.limiter.pause(retry_delay(exc, state.transient + 1, self.policy))


class EndpointPool:
    """The servers of one judge (module docstring); one event loop, so no lock."""

    def __init__(
        self, members: list[AttemptSender], on_notice: Callable[[str], None] | None = None
    ) -> None:
        self.members = members
        self._on_notice = on_notice

    @property
    def dead(self) -> bool:
        """Whether every server is dead: the run stops."""
        return all(m.dead for m in self.members)

    def _pick(self, tried: set[int], avoid: str | None = None) -> AttemptSender | None:
        live = [m for m in self.members if not m.dead and id(m) not in tried]
        return min(live, key=lambda m: (m.name == avoid, m.busy, m.sent)) if live else None

    async def send(self, state: CallState) -> GradeReply:
        """One attempt of `state`'s judgment on the server the pool picks (module docstring)."""
        tried: set[int] = set()
        member = self._pick(tried, state.failed_on) or self.members[0]
        while True:
            current = member
            current.busy += 1
            current.sent += 1
            try:
                reply = await current.send(state)
            except ServerNotAnswering as exc:
                self._drop(current, exc)
                tried.add(id(current))
                chosen = self._pick(tried) or self._pick(set())
                if chosen is None:
                    raise self.not_answering(exc) from exc
                member = chosen
                continue
            except InvalidReply:
                current.answers += 1
                raise
            except (openai.APITimeoutError, openai.APIStatusError):
                state.failed_on = current.name  # the retry goes to another server if it can
                raise  # a timeout may still be answered: the retry policy's, as for one server
            except openai.APIConnectionError:
                tried.add(id(current))
                other = self._pick(tried)
                if other is None:
                    raise
                member = other
                continue
            finally:
                current.busy -= 1
            current.answers += 1
            state.failed_on = None
            return reply

    def not_answering(self, last: Exception | None = None) -> ServerNotAnswering:
        """The error that stops the run: every server is dead (with one, its own error)."""
        if len(self.members) == 1:
            return self.members[0].not_answering()
        names = ", ".join(m.name for m in self.members)
        said = f"; the last: {last}" if last is not None else ""
        return ServerNotAnswering(
            f"none of the {len(self.members)} servers of this run is answering ({names}){said}"
        )

    def _drop(self, member: AttemptSender, exc: ServerNotAnswering) -> None:
        """Drop a dead server, said once (with one server, nothing to say: the run stops)."""
        if member.dropped or len(self.members) == 1:
            return
        member.dropped = True
        left = sum(not m.dead for m in self.members)
        if left and self._on_notice is not None:
            self._on_notice(
                f"{member.name} is dropped from this run, its pairs go to the "
                f"{'other server' if left == 1 else f'other {left} servers'}: {exc}"
            )
