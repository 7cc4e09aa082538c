"""Where a reply's grade is, and what its token's logprobs say of it: P(grade = 0..3), or `Absent`
when the grade tokens hold less than `MIN_GRADE_MASS`. `CompletionBody` is a reply body decoded by
msgspec (a batch import's fast path): each default is what `dict.get` gives, so it reads the same.
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import Any

import msgspec

from grader.models import GRADES


class TopLogprob(msgspec.Struct, gc=False):
    token: Any = ""
    logprob: Any = None


class TokenLogprob(TopLogprob, gc=False):
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


MIN_GRADE_MASS = 0.5
"""The least probability the grade tokens must hold at the grade token for a distribution."""


class Absent(str):
    """Why a reply with logprobs has no grade distribution (a str: the reason)."""


_DECODER = json.JSONDecoder()
_WS = re.compile(r"\s*")


def top_level_grade_offset(content: str) -> int | None:
    """Offset of the top-level `grade` value's first digit in a JSON reply (None: not found)."""
    scan = _DECODER.scan_once  # type: ignore[attr-defined]  # raw_decode without its wrapper: StopIteration is its error

    def skip(i: int) -> int:
        """The position after any whitespace at `i` (the regex runs only where there is some)."""
        if content[i].isspace():
            return _WS.match(content, i).end()  # type: ignore[union-attr]  # always matches
        return i

    try:
        i = skip(0)
        if content[i] != "{":
            return None
        i = skip(i + 1)
        while content[i] == '"':
            key, i = scan(content, i)
            i = skip(i)
            if content[i] != ":":
                return None
            start = skip(i + 1)
            _, i = scan(content, start)
            if key == "grade":
                return start + 1 if content[start] == '"' else start
            i = skip(i)
            if content[i] != ",":
                return None
            i = skip(i + 1)
    except (ValueError, IndexError, StopIteration):
        return None
    return None


def field(obj: Any, name: str, default: Any = None) -> Any:
    """`obj[name]` of a dict, `obj.name` of a decoded struct (`CompletionBody`), else `default`."""
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)  # (no other JSON value has an attribute of these names)


def grade_distribution(
    logprobs: Any, content: str, offset: int | None, *, grade: int | None = None
) -> list[float] | Absent | None:
    """P(grade = 0..3) from the logprobs of the token holding the grade digit at `offset`; None when
    there are none or that token is not exactly `grade` (the token, not the argmax, must agree),
    `Absent` when the grade tokens hold too little mass."""
    tokens = field(logprobs, "content")
    if offset is None or not isinstance(tokens, list):
        return None
    position = 0
    for token in tokens:
        text = token.get("token", "") if isinstance(token, dict) else getattr(token, "token", "")
        if position <= offset < position + len(text):
            break
        position += len(text)
    else:
        return None
    chosen = _grade_of(text)
    if chosen is None or (grade is not None and chosen != grade):
        return None
    # renormalise the grade alternatives of that token (with itself, if not among them)
    mass = [0.0] * len(GRADES)
    seen_self = False
    for alt in field(token, "top_logprobs") or ():
        if isinstance(alt, dict):  # (`field` inlined: ~5 alternatives a reply)
            alt_token, logprob = alt.get("token", ""), alt.get("logprob")
        else:
            alt_token, logprob = getattr(alt, "token", ""), getattr(alt, "logprob", None)
        alt_grade = _grade_of(alt_token)
        if alt_grade is None or not isinstance(logprob, _NUMBER):
            continue
        mass[alt_grade] += math.exp(logprob)
        seen_self = seen_self or alt_token == text
    hit_logprob = field(token, "logprob")
    if not seen_self and isinstance(hit_logprob, _NUMBER):
        mass[chosen] += math.exp(hit_logprob)
    total = sum(mass)
    if total <= 0:
        return None
    if total < MIN_GRADE_MASS:
        return Absent(
            f"logprobs left out: the grade tokens hold {total:.2f} of the probability at the "
            f"grade token (less than {MIN_GRADE_MASS})"
        )
    return [m / total for m in mass]


_NUMBER = (int, float)


def _grade_of(token: Any) -> int | None:
    """The grade a token spells (`2`, ` 2`, `"2`), None for any other token or value."""
    return _grade_of_text(token) if isinstance(token, str) else None


@functools.lru_cache(maxsize=1024)  # (a batch's replies repeat a few grade tokens)
def _grade_of_text(token: str) -> int | None:
    core = token.strip().strip('"').strip()
    return int(core) if core in {"0", "1", "2", "3"} else None
