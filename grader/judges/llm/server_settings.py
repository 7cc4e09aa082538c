"""What a run sends (`ServerSettings.body`: live, `prompts render` and the Batch API alike) and what
its server accepts: the first refusal of an output mode, logprobs, `max_tokens` or a fixed
temperature switches it for the whole run, told once to `on_switch` (modes fall back to text).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from grader.prompts import VENDOR_FIELDS, OutputMode, PromptSpec


@dataclass(frozen=True)
class ModeSwitch:
    """A recorded output-mode fallback: from which mode to which, and the server's words."""

    from_mode: str
    to_mode: str
    reason: str


_FORMAT_WORDS = (
    "response_format",
    "json_schema",
    "json_object",
    "structured output",
    "structured_outputs",
    "guided",
)
REFUSAL_WORDS = (
    "not supported",
    "unsupported",
    "not support",
    "n't support",
    "not implemented",
    "input should be",
    "must be one of",
    "unknown field",
    "unknown variant",
    "unknown type",
    "unrecognized",
    "not allowed",
    "not permitted",
)
"""Words of a 500 that say the request's format is not taken (the 500 names the format too)."""
FORMAT_STATUSES = frozenset({400, 422, 500})
"""Statuses a server refuses an output mode with (llama.cpp's server: 500)."""
FALLBACK: dict[str, OutputMode] = {
    "json_schema": "json_object_schema",
    "json_object_schema": "json_object",
    "json_object": "text",
    "vllm_structured_outputs": "json_object",
    "vllm_guided_json": "json_object",
    "ollama_format": "json_object",
}
"""The mode a run moves to when its server refuses the one it uses (text has none)."""
_FORMAT_FIELDS = ("response_format", *VENDOR_FIELDS.values())
_PARAMETERS = (
    ("logprobs", ("logprob",), "logprobs", False, "no-logprobs"),
    (
        "max_tokens",
        ("max_completion_tokens",),
        "token_param",
        "max_completion_tokens",
        "max_completion_tokens",
    ),
    ("temperature", ("temperature", "support"), "temperature", False, "server-default temperature"),
)
"""A refused request parameter: the field sent, the refusal's words, the setting that drops it."""
PLAIN_JSON_GIVE_UP = 3
"""Judgments in a row without a valid reply in plain JSON mode that move a run to text."""


class ServerSettings:
    """The output mode and request parameters this run uses now (see module docstring)."""

    def __init__(
        self,
        mode: OutputMode,
        *,
        logprobs: bool,
        on_switch: Callable[[ModeSwitch], None] | None = None,
    ) -> None:
        self.mode: OutputMode = mode
        self.on_switch = on_switch
        self.logprobs = logprobs
        self.token_param = "max_tokens"
        self.temperature = True
        self.switches: list[ModeSwitch] = []
        self.invalid_in_a_row = 0
        self._lock = asyncio.Lock()

    def body(
        self, spec: PromptSpec, model: str, messages: list[dict[str, Any]], mode: OutputMode
    ) -> dict[str, Any]:
        """The chat.completions body (the prompt's sampling and format), less what was refused."""
        body: dict[str, Any] = {"model": model, "messages": messages}
        if self.temperature:
            body["temperature"] = spec.temperature
        body[self.token_param] = spec.max_tokens
        if self.logprobs:
            body["logprobs"] = True
            if spec.top_logprobs:
                body["top_logprobs"] = spec.top_logprobs
        response_format = spec.response_format(mode)
        if response_format is not None:
            body["response_format"] = response_format
        body.update(spec.vendor_fields(mode))
        for name, value in spec.extra_sampling.items():
            body.setdefault(name, value)
        return body

    async def adapt(
        self, used: OutputMode, body: dict[str, Any], message: str, status: int = 400
    ) -> bool:
        """Whether this refusal refused something the run can do without (then resend)."""
        if status not in FORMAT_STATUSES:
            return False
        said = message.lower()
        async with self._lock:
            fields = [f for f in _FORMAT_FIELDS if f in body]
            refused = status != 500 or any(w in said for w in REFUSAL_WORDS)  # a 500 says so
            if fields and refused and any(w in said for w in (*_FORMAT_WORDS, *fields)):
                said_as = message if message.startswith(str(status)) else f"{status} {message}"
                self.switch_mode(used, f"HTTP {said_as}")
                return self.mode != used
            if status == 500:  # only an output mode is told apart in a 500's words
                return False
            for sent, words, setting, value, switched_to in _PARAMETERS:
                if sent in body and all(w in said for w in words):
                    if getattr(self, setting) != value:
                        setattr(self, setting, value)
                        self._switch(sent, switched_to, message)
                    return True
        return False

    def judged(self, mode: OutputMode, *, valid: bool) -> None:
        """A judgment in `mode` ended with a valid reply or none; PLAIN_JSON_GIVE_UP in a row with
        none (and none valid before) move the run on along FALLBACK."""
        if mode != self.mode or (mode != "json_object" and mode not in VENDOR_FIELDS):
            return
        if valid:
            self.invalid_in_a_row = -1  # it works for this model: stay
        elif self.invalid_in_a_row >= 0:
            self.invalid_in_a_row += 1
            if self.invalid_in_a_row >= PLAIN_JSON_GIVE_UP:
                self.switch_mode(
                    mode,
                    f"{PLAIN_JSON_GIVE_UP} pairs in a row had no valid reply in {mode} mode "
                    "(it does not hold the model to the schema here)",
                )

    def switch_mode(self, used: OutputMode, reason: str) -> bool:
        """Move the run from mode `used` to its fallback for `reason`; False when it cannot."""
        if self.mode != used or used not in FALLBACK:
            return False
        following = FALLBACK[used]
        self._switch(used, following, reason)
        self.mode = following
        return True

    def _switch(self, old: str, new: str, message: str) -> None:
        switch = ModeSwitch(old, new, message[:500])
        self.switches.append(switch)
        if self.on_switch is not None:
            self.on_switch(switch)
