"""What a failed connection was: refused, a DNS lookup that failed, a TLS handshake that failed.

The SDK says "Connection error." for all of them; `connect_failure` reads the cause down the
exception chain, so a message names it and a run whose first requests all fail to connect stops at
once. A timeout or a dropped connection is no failure to connect: the server was reached.
"""

from __future__ import annotations

import socket
import ssl

import openai

from grader.judges.llm.bounded_http import too_large

CONNECT_CAUSES = ("connection refused", "DNS lookup failed", "TLS failed", "could not connect")
"""The labels `connect_failure` starts its text with; the part before the colon."""


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not s for s in seen) and len(seen) < 16:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def connect_failure(exc: BaseException) -> str | None:
    """`label: detail` when `exc` is a failure to connect (label one of `CONNECT_CAUSES`), else
    None (a timeout, a dropped connection, an HTTP answer, anything else)."""
    if not isinstance(exc, openai.APIConnectionError) or isinstance(exc, openai.APITimeoutError):
        return None
    chain = _chain(exc)
    if not any(type(e).__name__ == "ConnectError" for e in chain):
        return None  # reached the server, then lost it (a dropped connection)
    root = chain[-1]
    detail = str(root) or type(root).__name__
    for e in chain:
        if isinstance(e, ConnectionRefusedError):
            return f"connection refused: {e}"
        if isinstance(e, socket.gaierror):
            return f"DNS lookup failed: {e}"
        if isinstance(e, ssl.SSLError):
            return f"TLS failed: {e}"
    return f"could not connect: {detail}"


def connection_message(exc: openai.APIConnectionError) -> str:
    """The SDK's message with the cause the chain holds: "Connection error. (connection refused:
    ...)", or "Connection error. (connection dropped: ...)" once connected; a timeout as is."""
    text = str(exc)
    if isinstance(exc, openai.APITimeoutError):
        return text
    large = too_large(exc)
    if large is not None:
        return f"{large} (the read stopped there)"
    cause = connect_failure(exc)
    if cause is None:
        chain = _chain(exc)
        if len(chain) < 2:
            return text
        root = chain[-1]
        cause = f"connection dropped: {str(root) or type(root).__name__}"
    return f"{text} ({cause})"
