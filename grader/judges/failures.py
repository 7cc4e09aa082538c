"""Whether a failed judgment is worth asking again: which failures a rerun can fix.

- `transient`: the transport or the server (timeouts, refused or dropped connections, 408, 409,
  429, 5xx), or a cause not known to be permanent: a rerun retries it and may well succeed.
- `invalid`: the model's reply failed validation after every re-ask. A rerun asks again; a model
  that answered badly once may answer the same way.
- `permanent`: the same input fails the same way every time: a deterministic judge that cannot
  grade the pair (the lexical baseline on a query without scorable terms) or a request the server
  rejects as such (400, 413, 422, ...). A rerun cannot fix it; only another input or judge can.

The kind is read from `Judgment.error.type` (the exception class or the judge's failure name)
and, for a bare HTTP status error, the status at the start of its message.

`failure_cause` names what happened in a few words ("connection refused", "timeout", "HTTP 503",
"invalid reply (bad_grade)"), so that a summary can group failures by cause.
"""

from __future__ import annotations

from typing import Literal

from grader.judges.llm.connect_errors import CONNECT_CAUSES
from grader.judges.llm.retry import RETRY_STATUSES
from grader.models import JudgmentError

FailureKind = Literal["transient", "invalid", "permanent"]

PERMANENT_TYPES = frozenset(
    {
        "NoQueryTerms",  # the lexical judge: the query has no scorable term
        "BadRequestError",  # 400: the server rejects this request as it is
        "UnprocessableEntityError",  # 422
        "_ModeRejected",  # every output mode refused
    }
)
INVALID_TYPES = frozenset({"InvalidReply"})


def failure_kind(error: JudgmentError | None) -> FailureKind:
    """The kind of a failed judgment's `error` (module docstring); None counts as transient."""
    if error is None:
        return "transient"
    if error.type in PERMANENT_TYPES:
        return "permanent"
    if error.type in INVALID_TYPES:
        return "invalid"
    if error.type == "APIStatusError":  # a status the SDK has no class for: 408, 413, 451, ...
        head = error.message.split(" ", 1)[0]
        if head.isdigit():
            status = int(head)
            if status not in RETRY_STATUSES and 400 <= status < 500:
                return "permanent"
    return "transient"


def failure_cause(error: JudgmentError | None) -> str:
    """What a failed judgment's `error` was, in a few words (module docstring)."""
    if error is None:
        return "no error recorded"
    message = error.message
    if error.type == "APITimeoutError":
        return "timeout"
    if error.type == "APIConnectionError":
        for label in (*CONNECT_CAUSES, "connection dropped"):
            if f"({label}:" in message:
                return label
        return "connection error"
    if error.type == "InvalidReply":
        kind = message.split(":", 1)[0].strip()
        return f"invalid reply ({kind})" if kind and " " not in kind else "invalid reply"
    head = message.split(" ", 1)[0]
    if head.isdigit() and len(head) == 3:
        return f"HTTP {head}"
    return error.type
