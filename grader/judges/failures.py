"""Whether a failed judgment is worth asking again: which failures a rerun can fix.

Kinds: `transient` (transport, 408/409/429/5xx: a rerun may succeed), `invalid` (the reply failed
validation), `permanent` (the same input fails every time: 400/413/422, too long a prompt, a query
the lexical judge cannot score) and `unknown` (never assumed transient). An ensemble's failure takes
its members' kind; `failure_cause` names the cause in a few words.
"""

from __future__ import annotations

import re
from typing import Literal

from grader.judges.llm.retry import RETRY_STATUSES, is_context_exceeded
from grader.judges.llm.transport import CONNECT_CAUSES
from grader.models import JudgmentError

FailureKind = Literal["transient", "invalid", "permanent", "unknown"]

PERMANENT_TYPES = frozenset(
    {
        "NoQueryTerms",  # the lexical judge: the query has no scorable term
        "BadRequestError",  # 400: the server rejects this request as it is
        "UnprocessableEntityError",  # 422
        "_ModeRejected",  # every output mode refused
        "ContextLengthExceeded",  # the prompt is past the server's context
    }
)
TRANSIENT_TYPES = frozenset(
    {
        "APITimeoutError",
        "APIConnectionError",
        "RateLimitError",
        "InternalServerError",
        "ConflictError",
        "ServerNotAnswering",
        "TimeoutError",
        "Batch:missing",  # a batch request with no answer: its batch or engine stopped before it
        "Batch:batch_expired",
        "Batch:batch_cancelled",
    }
)
_MEMBER = re.compile(r"(?:\(|; )[^:;()]+: ([A-Za-z_][A-Za-z0-9_]*): ")
"""A member's failure in an ensemble's message: "(judge: Type: message; judge: Type: ...)"."""


def failure_kind(error: JudgmentError | None) -> FailureKind:
    """The kind of a failed judgment's `error` (module docstring); None counts as transient."""
    if error is None:
        return "transient"
    if error.type != "EnsembleFailed":
        return _kind_of(error.type, error.message)
    kinds = {_kind_of(t, "") for t in _MEMBER.findall(error.message)}  # its members' kinds
    if "transient" in kinds:
        return "transient"
    if "invalid" in kinds:
        return "invalid"
    return "permanent" if kinds == {"permanent"} else "unknown"


def _kind_of(kind: str, message: str) -> FailureKind:
    if kind in PERMANENT_TYPES or is_context_exceeded(message):
        return "permanent"
    if kind == "InvalidReply":
        return "invalid"
    if kind in TRANSIENT_TYPES:
        return "transient"
    if kind == "APIStatusError":  # a status the SDK has no class for: 408, 413, 451, ...
        head = message.split(" ", 1)[0]
        if head.isdigit():
            return _status_kind(int(head))
    if kind.startswith("Batch:http_") and kind[11:].isdigit():  # an engine's error line
        return _status_kind(int(kind[11:]))
    return "unknown"


def _status_kind(status: int) -> FailureKind:
    """A 4xx but 408, 409, 429 is permanent (the server refuses the request as it is: 400 for
    a prompt past the context, 404 for a model it does not serve); any other status transient."""
    if status not in RETRY_STATUSES and 400 <= status < 500:
        return "permanent"
    return "transient"


def failure_cause(error: JudgmentError | None) -> str:
    """What a failed judgment's `error` was, in a few words (module docstring)."""
    if error is None:
        return "no error recorded"
    message = error.message
    if error.type == "ContextLengthExceeded" or is_context_exceeded(message):
        return "context length exceeded"
    if error.type == "APITimeoutError":
        return "timeout"
    if error.type == "APIConnectionError":
        labels = (*CONNECT_CAUSES, "connection dropped")
        return next((label for label in labels if f"({label}:" in message), "connection error")
    if error.type == "InvalidReply":
        kind = message.split(":", 1)[0].strip()
        return f"invalid reply ({kind})" if kind and " " not in kind else "invalid reply"
    head = message.split(" ", 1)[0]
    if head.isdigit() and len(head) == 3:
        return f"HTTP {head}"
    return error.type
