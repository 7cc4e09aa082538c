"""Where a reply's grade is, and what its token's logprobs say of it.

`top_level_grade_offset` finds the character offset of the top-level `grade` value of a JSON
reply (never a nested `"grade"`); `grade_distribution` walks the logprobs' tokens to the one
holding that offset, which must hold the grade given, and renormalises its top alternatives
that are grade tokens (others are ignored) into P(grade = 0..3). `grader.judges.llm.replies`
uses both for the expected grade and the confidence (the probability of the grade given).

The rule when the grade tokens hold little of the mass: a server that constrains the reply by a
grammar (llama.cpp's json_object + schema) reports the model's unconstrained alternatives, so at
the grade token the top alternatives may be mostly other words. When the grade tokens among them
hold less than `MIN_GRADE_MASS` of the probability (summed before renormalising), the
distribution is absent, with the reason (`Absent`), not a renormalised guess from a sliver.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from typing import Any

from grader.judges.llm.completion_body import Logprobs
from grader.models import GRADES

MIN_GRADE_MASS = 0.5
"""The least probability the grade tokens must hold at the grade token for a distribution."""


class Absent(str):
    """Why a reply with logprobs has no grade distribution (a str: the reason)."""


_DECODER = json.JSONDecoder()
_WS = re.compile(r"\s*")

_JSON_WS = r"[ \t\n\r]*"
JSON_STRING = r'"[^"\\\x00-\x1f]*+(?:\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4})[^"\\\x00-\x1f]*+)*+"'
"""A JSON string: runs of plain characters taken whole (possessive: nothing to backtrack), an
escape between them, rather than one character at a time."""
_GRADE_FIRST_OR_SECOND = re.compile(
    rf"{_JSON_WS}\{{{_JSON_WS}"
    rf'(?:"reason"{_JSON_WS}:{_JSON_WS}{JSON_STRING}{_JSON_WS},{_JSON_WS})?'
    rf'"grade"{_JSON_WS}:{_JSON_WS}'
)
"""A reply that opens with its grade, or with a string reason (one the JSON scanner takes)
then its grade (the schema's order, nearly every reply): the grade value starts where this
ends."""


def top_level_grade_offset(content: str, *, valid: bool = False) -> int | None:
    """Character offset of the top-level `grade` value's first digit (inside quotes for a
    string) of a reply that is valid JSON, found by walking the object's members (or at once
    when the grade comes first, or second after a string reason); None when it cannot be
    located. `valid`: the content is known to be one valid JSON text (it was decoded), so
    what follows a matched opening is the grade's value and is not scanned again (JSON's
    grammar reads a text one way: the opening's tokens are the ones its decode read)."""
    opening = _GRADE_FIRST_OR_SECOND.match(content)
    if opening is None or content[opening.end() : opening.end() + 1].isspace():
        return walk_to_grade(content)  # (other whitespace the walk's `\s` skips too)
    start = opening.end()
    if not valid:
        try:  # the value must be one, as the walk requires
            _DECODER.scan_once(content, start)  # type: ignore[attr-defined]
        except (ValueError, IndexError, StopIteration):
            return None
    return start + 1 if content[start] == '"' else start


def walk_to_grade(content: str) -> int | None:
    """`top_level_grade_offset` by walking the members of the reply's object."""
    scan = _DECODER.scan_once  # type: ignore[attr-defined]  # raw_decode without its wrapper: StopIteration is its error

    def skip(i: int) -> int:
        """The position after any whitespace at `i` (`isspace` is `\\s`'s test: the regex
        runs only where there is some)."""
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


def grade_distribution(
    logprobs: Any, content: str, offset: int | None, *, grade: int | None = None
) -> list[float] | Absent | None:
    """P(grade = 0..3) from the logprobs of the token holding the grade digit at `offset`.

    The token is found by walking the tokens' text up to the digit's character offset; its top
    alternatives that are grade digits (surrounding spaces or quotes ignored) are summed per grade
    and renormalised. None when there are no logprobs, the token holds more than the digit, or
    (with `grade`, the grade parsed from the reply) the token is not that grade: a distribution
    read from another token would be about something else. The token, not the argmax, must agree:
    a sampled grade need not be the most likely one. `Absent` (with the reason) when the grade
    tokens hold less than MIN_GRADE_MASS of the token's probability.
    """
    if offset is None or not isinstance(logprobs, dict):
        return None
    tokens = logprobs.get("content")
    if not isinstance(tokens, list) or not tokens:
        return None
    position = 0
    hit: dict[str, Any] | None = None
    for token in tokens:
        text = token.get("token", "") if isinstance(token, dict) else ""
        if position <= offset < position + len(text):
            hit = token
            break
        position += len(text)
    if hit is None:
        return None
    hit_token = hit.get("token", "")
    chosen = _grade_of(hit_token)
    if chosen is None or (grade is not None and chosen != grade):
        return None
    alternatives = hit.get("top_logprobs") or []
    return _renormalised(
        chosen,
        hit_token,
        hit.get("logprob"),
        ((alt.get("token", ""), alt.get("logprob")) for alt in alternatives),
    )


def token_distribution(
    logprobs: Logprobs | None, content: str, offset: int | None, *, grade: int | None = None
) -> list[float] | Absent | None:
    """`grade_distribution` of logprobs decoded into structs (`completion_body`): the same
    value, read from the same fields (a field's default is what `dict.get` gives)."""
    if offset is None or logprobs is None:
        return None
    tokens = logprobs.content
    if not tokens:
        return None
    position = 0
    for token in tokens:
        text = token.token
        if position <= offset < position + len(text):
            break
        position += len(text)
    else:
        return None
    hit_token = token.token
    chosen = _grade_of(hit_token)
    if chosen is None or (grade is not None and chosen != grade):
        return None
    alternatives = token.top_logprobs or ()
    return _renormalised(
        chosen, hit_token, token.logprob, ((alt.token, alt.logprob) for alt in alternatives)
    )


def _renormalised(
    chosen: int, hit_token: Any, hit_logprob: Any, alternatives: Iterable[tuple[Any, Any]]
) -> list[float] | Absent | None:
    """P(grade = 0..3) from the (token, logprob) alternatives of the token that holds grade
    `chosen`: those that are grade tokens summed per grade (the token's own logprob added
    when it is not among them), renormalised; None when no mass is left, `Absent` when the
    grade tokens hold less than MIN_GRADE_MASS."""
    mass = [0.0] * len(GRADES)
    seen_self = False
    known, exp = _GRADE_OF, math.exp
    for alt_token, logprob in alternatives:
        # `_grade_of`, its memo looked up here first (~5 alternatives a reply; -1: not in it)
        alt_grade = known.get(alt_token, -1) if type(alt_token) is str else -1
        if alt_grade == -1:
            alt_grade = _grade_of(alt_token)
        if alt_grade is None:
            continue
        if not isinstance(logprob, _NUMBER):
            continue
        mass[alt_grade] += exp(logprob)
        # (a grade token is never "", so this is `alt_token == hit_token` of a grade token)
        seen_self = seen_self or alt_token == hit_token
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


def _grade_of(token: str) -> int | None:
    if type(token) is str:  # only plain str: a subclass may strip otherwise
        known = _GRADE_OF.get(token, _UNKNOWN)
        if known is not _UNKNOWN:
            return known  # type: ignore[return-value]
    core = token.strip().strip('"').strip()
    grade = int(core) if core in {"0", "1", "2", "3"} else None
    if type(token) is str and len(token) <= 8 and len(_GRADE_OF) < 4096:
        _GRADE_OF[token] = grade
    return grade


_GRADE_OF: dict[str, int | None] = {}
"""`_grade_of` of short tokens already seen: a reply's logprobs hold ~8 tokens and their
alternatives, nearly always the same few ("3", " 2", '"', ...)."""
_UNKNOWN = object()
