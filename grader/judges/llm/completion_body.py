"""A chat.completion body decoded into structs, for a batch import's fast path (`accepted_reply`).

msgspec decodes a line into these in about half the time of dicts; each default is what `dict.get`
gives the validator, so it reads the same values. A part of another shape fails the decode, and the
line is read as a dict.
"""

from __future__ import annotations

from typing import Any

import msgspec


class TopLogprob(msgspec.Struct, gc=False):
    """One alternative of a token."""

    token: Any = ""
    logprob: Any = None


class TokenLogprob(msgspec.Struct, gc=False):
    """One token of the reply, with its top alternatives."""

    token: Any = ""
    logprob: Any = None
    top_logprobs: list[TopLogprob] | None = None


class Logprobs(msgspec.Struct, gc=False):
    content: list[TokenLogprob] | None = None


class Message(msgspec.Struct, gc=False):
    content: Any = None
    refusal: Any = None


class Choice(msgspec.Struct, gc=False):
    message: Message | None = None
    finish_reason: Any = None
    logprobs: Logprobs | None = None


class TokenDetails(msgspec.Struct, gc=False):
    cached_tokens: Any = None


class UsageCounts(msgspec.Struct, gc=False):
    prompt_tokens: Any = None
    completion_tokens: Any = None
    prompt_tokens_details: TokenDetails | None = None


class CompletionBody(msgspec.Struct, gc=False):
    """The body of a chat.completion reply (the parts read)."""

    model: Any = None
    usage: UsageCounts | None = None
    choices: list[Choice] | None = None
