"""What the LLM judge sends and reports: `request_body` (what the live judge, `prompts render` and
the Batch API all send), `CallRecord` (one HTTP attempt) and `ModeSwitch` (a once-per-run
fallback)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from grader.models import CallRecord
from grader.prompts import OutputMode, PromptSpec

__all__ = ["CallRecord", "ModeSwitch", "RenderedRequest", "request_body"]


@dataclass(frozen=True)
class ModeSwitch:
    """A recorded output-mode fallback: from which mode to which, and the server's words."""

    from_mode: str
    to_mode: str
    reason: str


@dataclass(frozen=True)
class RenderedRequest:
    """A chat.completions request body and whether its document was truncated."""

    body: dict[str, Any]
    truncated: bool
    mode: OutputMode


def request_body(
    spec: PromptSpec,
    model: str,
    messages: list[dict[str, Any]],
    mode: OutputMode,
    *,
    logprobs: bool | None = None,
    token_param: str = "max_tokens",
    temperature: bool = True,
) -> dict[str, Any]:
    """The chat.completions body: messages plus the prompt file's sampling and output format.
    `logprobs`, `token_param` and `temperature` let a run drop what its server refuses."""
    body: dict[str, Any] = {"model": model, "messages": messages}
    if temperature:
        body["temperature"] = spec.temperature
    body[token_param] = spec.max_tokens
    if spec.logprobs if logprobs is None else logprobs:
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


OPENAI_FIELDS = frozenset(
    {
        "model",
        "messages",
        "temperature",
        "max_tokens",
        "max_completion_tokens",
        "logprobs",
        "top_logprobs",
        "response_format",
        "seed",
        "top_p",
        "stop",
        "n",
        "frequency_penalty",
        "presence_penalty",
    }
)
"""Request fields the SDK's `chat.completions.create` takes as keywords; any other field of a
body (vLLM's `structured_outputs`, llama.cpp's `repeat_penalty`, ...) goes in `extra_body`."""


def sdk_arguments(body: dict[str, Any]) -> dict[str, Any]:
    """`body` as `chat.completions.create` keywords: the fields outside OpenAI's in
    `extra_body` (the SDK merges them into the JSON it sends, so the server gets `body`)."""
    extra = {k: v for k, v in body.items() if k not in OPENAI_FIELDS}
    if not extra:
        return body
    args = {k: v for k, v in body.items() if k in OPENAI_FIELDS}
    args["extra_body"] = extra
    return args
