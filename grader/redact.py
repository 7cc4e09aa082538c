"""The one way secrets are masked: every occurrence of each secret becomes `[redacted]`.

Used wherever text may carry an API key before it is stored, written or shown: the LLM judge's
messages and raw replies, the grading run's judgments, and the store's rows and call log.
"""

from __future__ import annotations

from collections.abc import Iterable

MASK = "[redacted]"
"""What a masked secret reads as, everywhere."""


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with every non-empty secret replaced by `MASK`."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, MASK)
    return text
