"""What a run's server accepts, learned once from its refusals and shared by every worker.

A server may refuse JSON-schema output (vLLM and Ollama builds do), logprobs, `max_tokens`
(OpenAI reasoning models want `max_completion_tokens`) or a fixed temperature. The first 400
that says so switches the setting for the whole run, under a lock, so concurrent workers do not
each discover it (and the run does not mix output modes); every switch is recorded.
Output modes fall back json_schema -> json_object -> text (the prompt's strict final line).
"""

from __future__ import annotations

import asyncio
from typing import Any

from grader.judges.llm.types import ModeSwitch, request_body
from grader.prompts import OUTPUT_MODES, OutputMode, PromptSpec

_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "structured output", "guided")


class ServerSettings:
    """The output mode and request parameters this run uses now (see module docstring)."""

    def __init__(self, mode: OutputMode, *, logprobs: bool) -> None:
        self.mode: OutputMode = mode
        self.logprobs = logprobs
        self.token_param = "max_tokens"
        self.temperature = True
        self.switches: list[ModeSwitch] = []
        self._lock = asyncio.Lock()

    def body(
        self, spec: PromptSpec, model: str, messages: list[dict[str, Any]], mode: OutputMode
    ) -> dict[str, Any]:
        """The request body with the parameters this server accepts."""
        return request_body(
            spec,
            model,
            messages,
            mode,
            logprobs=self.logprobs,
            token_param=self.token_param,
            temperature=self.temperature,
        )

    async def adapt(self, used: OutputMode, body: dict[str, Any], message: str) -> bool:
        """Whether this 400 `message` (for `body`, sent in mode `used`) refused something we can
        do without; if so the run's settings have changed (now or by another worker) and the
        request should be sent again."""
        said = message.lower()
        async with self._lock:
            if "response_format" in body and any(w in said for w in _FORMAT_WORDS):
                if self.mode == used:
                    following = OUTPUT_MODES[OUTPUT_MODES.index(used) + 1]
                    self._switch(used, following, message)
                    self.mode = following
                return True
            if body.get("logprobs") and "logprob" in said:
                if self.logprobs:
                    self.logprobs = False
                    self._switch("logprobs", "no-logprobs", message)
                return True
            if "max_tokens" in body and "max_completion_tokens" in said:
                if self.token_param == "max_tokens":
                    self.token_param = "max_completion_tokens"
                    self._switch("max_tokens", "max_completion_tokens", message)
                return True
            if "temperature" in body and "temperature" in said and "support" in said:
                if self.temperature:
                    self.temperature = False
                    self._switch("temperature", "server-default temperature", message)
                return True
        return False

    def _switch(self, old: str, new: str, message: str) -> None:
        self.switches.append(ModeSwitch(old, new, message[:500]))
