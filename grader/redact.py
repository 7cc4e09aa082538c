"""The one way secrets are masked (each occurrence becomes `[redacted]`) wherever text may carry
an API key before it is stored, written or shown; `redact_url` masks a URL's password."""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit, urlunsplit

MASK = "[redacted]"
"""What a masked secret reads as, everywhere."""


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every non-empty secret replaced by `MASK`."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    return text


def url_secrets(url: str | None) -> tuple[str, ...]:
    """The credentials a URL carries: its password and `user:password`, longest first."""
    if not url:
        return ()
    parts = urlsplit(url)
    if parts.password is None:
        return ()
    userinfo = parts.netloc.rpartition("@")[0]
    return tuple(s for s in (userinfo, parts.password) if s)


def redact_url(url: str) -> str:
    """`url` with its password, if any, replaced by `MASK`, fit to be shown."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user = userinfo.partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{user}:{MASK}@{hostport}"))
