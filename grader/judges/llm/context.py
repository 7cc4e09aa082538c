"""What a run learns of its server before the first request (`GET /v1/models`: models, context),
and `ContextFit`, which cuts a document so the request fits that context.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import openai

from grader.cost import estimate_usage
from grader.judges.llm.transport import deadline
from grader.models import Doc, Query
from grader.prompts import MessageRenderer, OutputMode, PromptSpec
from grader.redact import redact_url
from grader.spelling import option

CHARS_PER_TOKEN = 3
"""Characters of document text counted as one token when cutting it to a context."""
MARGIN_TOKENS = 64
"""Tokens kept free besides the prompt and the reply (chat template, estimate's error)."""
MIN_DOC_CHARS = 200
"""A cut document keeps at least this many characters (or all of a shorter one), else the pair
fails (`DocumentDoesNotFit`): a model shown a near-empty document would grade the cut."""


class DocumentDoesNotFit(Exception):
    """The prompt around a document leaves it too little of the server's context."""


_CONTEXT_KEYS = ("max_model_len", "n_ctx", "context_length", "context_window", "n_ctx_train")


@dataclass(frozen=True)
class ServerInfo:
    """What `GET /v1/models` said: the model ids served and the context (None: not said)."""

    models: tuple[str, ...]
    context: int | None


def read_models(payload: Any) -> ServerInfo:
    """The `ServerInfo` of a `/v1/models` reply body (as parsed JSON)."""
    data = payload.get("data") if isinstance(payload, dict) else None
    models: list[str] = []
    context: int | None = None
    for entry in data if isinstance(data, list) else []:
        if not isinstance(entry, dict):
            continue
        if isinstance(entry.get("id"), str):
            models.append(entry["id"])
        for where in (entry, entry.get("meta") or {}):
            for key in _CONTEXT_KEYS if isinstance(where, dict) else ():
                value = where.get(key)
                if context is None and isinstance(value, int) and value > 0:
                    context = value
    return ServerInfo(tuple(models), context)


async def learn_server(
    client: openai.AsyncOpenAI,
    model: str,
    fit: ContextFit,
    on_notice: Callable[[str], None] | None,
    timeout: float | None = None,
) -> ServerInfo:
    """What the server's `/v1/models` says within `timeout`: a model it does not list is told to
    `on_notice` (llama.cpp answers any name with its one model); its context fills `fit`'s."""
    url = str(client.base_url).rstrip("/") + "/models"
    try:
        async with deadline(timeout, "GET", url):
            raw = await client.models.with_raw_response.list()
            info = read_models(json.loads(raw.http_response.text))
    except (openai.APIError, ValueError):
        info = ServerInfo((), None)
    if info.models and model not in info.models and on_notice is not None:
        listed = ", ".join(info.models[:5]) + (" ..." if len(info.models) > 5 else "")
        on_notice(
            f"{redact_url(str(client.base_url))} lists the models {listed}, not {model!r}: a "
            f"server with one model (llama.cpp) answers with that one whatever the name. Give "
            f"{option('--model', 'model=')} as listed to be sure"
        )
    if fit.max_context is None and info.context is not None:
        fit.max_context = info.context
    return info


class ContextFit:
    """Renders a pair's messages, the document cut to fit `max_context` tokens (if given)."""

    def __init__(self, spec: PromptSpec, max_context: int | None = None) -> None:
        self.spec = spec
        self.max_context = max_context
        self._renderer = lru_cache(maxsize=256)(self._make_renderer)

    def messages(
        self, query: Query, doc: Doc, mode: OutputMode
    ) -> tuple[list[dict[str, str]], bool]:
        """The chat messages for one pair in `mode`, and whether the document was cut."""
        budget = self.spec.doc_budget_chars
        if self.max_context is not None:  # the document characters that fit around the prompt
            empty, _ = self._renderer(mode, 0).messages(query, doc.model_copy(update={"text": ""}))
            around = estimate_usage(empty, self.spec.max_tokens).prompt_tokens
            free = self.max_context - around - self.spec.max_tokens - MARGIN_TOKENS
            fits = max(0, free * CHARS_PER_TOKEN)
            if fits < min(len(doc.text), MIN_DOC_CHARS, budget):
                raise DocumentDoesNotFit(
                    f"the prompt around document {doc.doc_id} leaves {fits} of its "
                    f"{len(doc.text)} characters in a context of {self.max_context} tokens; "
                    f"raise {option('--max-context', 'max_context=')} (the server's n_ctx) or "
                    "shorten the prompt"
                )
            budget = min(budget, fits)
        return self._renderer(mode, budget).messages(query, doc)

    def _make_renderer(self, mode: OutputMode, budget: int) -> MessageRenderer:
        return MessageRenderer(dataclasses.replace(self.spec, doc_budget_chars=budget), mode)
