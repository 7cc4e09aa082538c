"""The SDK client an LLM judge sends with, and the secrets to keep out of what it records.

The key and URL follow `grader.judges.llm.endpoint`'s rule (a server other than OpenAI's without
a key gets the one placeholder). The SDK's own retries are off: the judge's retry loop is the
only one. A client given by the caller is used with those options; its key is a secret too.
"""

from __future__ import annotations

import os

import openai

from grader.judges.llm.bounded_http import ReplyLimits, bounded_http_client
from grader.judges.llm.endpoint import (
    BASE_URL_ENV,
    KEY_ENV,
    PLACEHOLDER_KEY,
    api_key_for,
    env_key_for,
)
from grader.redact import url_secrets


def make_client(
    *,
    base_url: str | None,
    api_key: str | None,
    client: openai.AsyncOpenAI | None,
    timeout: float,
    limits: ReplyLimits | None = None,
) -> tuple[openai.AsyncOpenAI, tuple[str, ...]]:
    """The client for `base_url` with `api_key` (by the endpoint rule), or `client` with the judge's
    options, sending through `BoundedHTTPClient`; and the keys to redact."""
    url = base_url or os.environ.get(BASE_URL_ENV) or None
    key = api_key if api_key is not None else env_key_for(url, os.environ.get(KEY_ENV))
    if client is None:
        key = api_key_for(url, key)  # a server other than OpenAI's may need no key
        client = openai.AsyncOpenAI(
            api_key=key,
            base_url=url,
            timeout=timeout,
            max_retries=0,
            http_client=bounded_http_client(limits),
        )
    else:
        client = client.with_options(max_retries=0, timeout=timeout)
        key = key or getattr(client, "api_key", None)
    secrets = tuple(
        s
        for s in (key, getattr(client, "api_key", None))
        if s and len(s) >= 4 and s != PLACEHOLDER_KEY
    ) + url_secrets(str(client.base_url))
    return client, secrets
