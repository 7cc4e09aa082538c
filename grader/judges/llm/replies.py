"""Turn one chat.completion response body into a validated grade, or say exactly why not: the one
validator of LLM replies (live and batch alike); nothing here guesses a grade.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple

from grader.judges.llm.grade_token import (
    Absent,
    Choice,
    CompletionBody,
    Logprobs,
    field,
    grade_distribution,
    top_level_grade_offset,
)
from grader.models import GRADES, Usage
from grader.prompts import OutputMode, PromptSpec

_ASCII_INT = re.compile(r"\s*-?[0-9]+\s*")
"""An integer as a person types it in ASCII: `\\d` and int() would also take "٣" or "３"."""


class _DuplicateKey(Exception):
    """A JSON object names the same key twice (which one counts would be a guess)."""

    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json `object_pairs_hook`: the object as a dict, or _DuplicateKey if a key repeats."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


class InvalidReply(Exception):
    """A reply that cannot be a grade. `kind` is one of: not_json_body, no_choice, refusal,
    length, content_filter, empty, malformed_json, schema, out_of_range, no_final_line."""

    def __init__(
        self, kind: str, message: str, *, raw: str | None = None, usage: Usage | None = None
    ):
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.raw = raw
        self.usage = usage or Usage()


class GradeReply(NamedTuple):
    """A validated reply: the grade, the model's reason, what logprobs say, tokens used (a
    NamedTuple: immutable, and made in a fifth of a frozen dataclass's time, once a reply)."""

    grade: int
    reason: str | None
    distribution: list[float] | None
    expected_grade: float | None
    confidence: float | None
    usage: Usage
    raw: str
    finish_reason: str | None
    notes: list[str] | None = None


def usage_of(body: Any) -> Usage:
    """Prompt, completion and cached tokens of a response body (zeros when absent)."""
    usage = field(body, "usage")
    details = field(usage, "prompt_tokens_details")
    cached = field(details, "cached_tokens", 0)
    return _usage(field(usage, "prompt_tokens"), field(usage, "completion_tokens"), cached)


def reports_cached(body: dict[str, Any]) -> bool:
    """Whether a response body says its cached prompt tokens (llama.cpp's server does not)."""
    details = field(field(body, "usage"), "prompt_tokens_details")
    return isinstance(field(details, "cached_tokens"), int)


def _usage(prompt: Any, completion: Any, cached: Any) -> Usage:
    """The Usage of these token counts (a missing count is 0)."""
    counts = (int(prompt or 0), int(completion or 0), int(cached or 0))
    made = _USAGES.get(counts)
    if made is None:
        made = Usage(prompt_tokens=counts[0], completion_tokens=counts[1], cached_tokens=counts[2])
        if len(_USAGES) < 65_536:
            _USAGES[counts] = made
    return made


_USAGES: dict[tuple[int, int, int], Usage] = {}
"""`usage_of`'s Usages by their counts, made once each (Usage is frozen; a batch's replies
repeat a few thousand counts, and making one took a third of `usage_of`'s time)."""


def parse_body(text: str) -> dict[str, Any]:
    """The JSON body of a 200 reply, or InvalidReply("not_json_body") with the text kept."""
    try:
        body = json.loads(text)
    except ValueError:
        raise InvalidReply(
            "not_json_body", "the server's 200 reply is not JSON", raw=text[:4000]
        ) from None
    if not isinstance(body, dict):
        raise InvalidReply("not_json_body", "the server's reply is not a JSON object", raw=text)
    return body


def parse_completion(
    body: dict[str, Any] | CompletionBody, *, mode: OutputMode, spec: PromptSpec
) -> GradeReply:
    """Validate one chat.completion body (a dict, or decoded structs) into a grade, or raise."""
    usage = usage_of(body)
    choices = field(body, "choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict | Choice):
        raw = json.dumps(body, ensure_ascii=False)[:4000]
        raise InvalidReply("no_choice", "the reply has no choices", raw=raw, usage=usage)
    choice = choices[0]
    message = field(choice, "message")
    logprobs = field(choice, "logprobs")
    content = field(message, "content")
    try:
        return _graded(
            content,
            field(choice, "finish_reason"),
            field(message, "refusal"),
            logprobs if isinstance(logprobs, dict | Logprobs) else None,
            usage,
            mode,
            spec,
        )
    except InvalidReply as exc:  # every reason a reply is no grade keeps its content and usage
        exc.usage, exc.raw = usage, content if exc.kind != "refusal" else exc.raw
        raise


def accepted_reply(
    body: CompletionBody, *, mode: OutputMode, spec: PromptSpec
) -> GradeReply | None:
    """`parse_completion` of a body decoded into structs (a batch import's fast path); None where it
    would refuse (validate the dict then: it says why)."""
    try:
        return parse_completion(body, mode=mode, spec=spec)
    except Exception:  # InvalidReply, or a value parse_completion raises on too
        return None


def _graded(
    content: Any,
    finish: Any,
    refusal: Any,
    logprobs: Any,
    usage: Usage,
    mode: OutputMode,
    spec: PromptSpec,
) -> GradeReply:
    """The grade of a reply's first choice, or InvalidReply."""
    if refusal:
        raise InvalidReply("refusal", f"the model refused: {refusal}", raw=refusal)
    if finish == "length":
        raise InvalidReply(
            "length",
            "the reply was cut off at max_tokens before it was complete; keep the reason short",
        )
    if finish == "content_filter":
        raise InvalidReply("content_filter", "the reply was blocked by a content filter")
    if not isinstance(content, str) or not content or content.isspace():  # (strip copied it)
        raise InvalidReply("empty", "the reply has no content")
    notes: list[str] | None = None
    if mode == "text":
        grade, reason, offset, notes = _parse_final_line(content, spec)
    else:
        grade, reason, notes = _parse_json(content)
        # Where the grade is matters only to read its logprobs (a walk over the reply).
        offset = top_level_grade_offset(content) if logprobs is not None else None
        if offset is None and notes is not None and field(logprobs, "content"):
            notes = [*notes, LENIENT_LOGPROBS_NOTE]  # (notes: the lenient read's, only then)
    if grade not in GRADES:
        message = f"grade {grade} is outside 0..3; use 0, 1, 2 or 3"
        raise InvalidReply("out_of_range", message)
    distribution = grade_distribution(logprobs, content, offset, grade=grade)
    expected = confidence = None
    if isinstance(distribution, Absent):
        notes = [*(notes or ()), str(distribution)]
        distribution = None
    elif distribution is not None:
        expected = sum([g * p for g, p in zip(GRADES, distribution, strict=True)])
        confidence = distribution[grade]
        likeliest = max(GRADES, key=distribution.__getitem__)
        if distribution[likeliest] > distribution[grade]:
            notes = [
                *(notes or ()),
                f"logprobs: the most likely grade is {likeliest} "
                f"(p={distribution[likeliest]:.2f}), not the grade given {grade} "
                f"(p={distribution[grade]:.2f})",
            ]
    # tuple.__new__ makes the NamedTuple in C, skipping its Python-level __new__ and keywords
    return tuple.__new__(
        GradeReply,
        (grade, reason, distribution, expected, confidence, usage, content, finish, notes),
    )


_STRICT_JSON = json.JSONDecoder(object_pairs_hook=_no_duplicate_keys)
"""What `json.loads(text, object_pairs_hook=_no_duplicate_keys)` uses, made once."""


def _parse_json(content: str) -> tuple[int, str | None, list[str] | None]:
    notes: list[str] | None = None
    try:
        try:
            if content.startswith("\ufeff"):  # json.loads's own error for a byte-order mark
                data = json.loads(content, object_pairs_hook=_no_duplicate_keys)
            else:
                data = _decode_strict(content)
        except ValueError as exc:
            if "control character" not in str(exc):
                raise
            data = _LENIENT_JSON.decode(content)  # raw newlines in a string: llama.cpp lets them
            notes = [LENIENT_NOTE]
    except _DuplicateKey as dup:
        raise InvalidReply(
            "schema", f"the reply names {dup.key!r} more than once; give each field once"
        ) from None
    except ValueError as exc:
        raise InvalidReply("malformed_json", f"the reply is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InvalidReply(
            "schema", 'the reply must be a JSON object {"reason": ..., "grade": ...}'
        )
    grade: Any = data.get("grade")
    reason: Any = data.get("reason")
    if type(grade) is str and _ASCII_INT.fullmatch(grade):
        grade = int(grade)  # a lone digit string is accepted
    problems = [] if type(grade) is int else [f"grade must be an integer 0..3, got {grade!r}"]
    if reason is not None and type(reason) is not str:
        problems.append(f"reason must be a string, got {reason!r}")
    if problems:
        raise InvalidReply("schema", f"the reply does not match the schema ({'; '.join(problems)})")
    return grade, (reason or None), notes


LENIENT_NOTE = "reply read leniently: its JSON has raw control characters (newlines) in a string"
LENIENT_LOGPROBS_NOTE = (
    "logprobs left out: the grade's token cannot be located in a reply read leniently"
)
_LENIENT_JSON = json.JSONDecoder(object_pairs_hook=_no_duplicate_keys, strict=False)


def _decode_strict(content: str) -> Any:
    """`_STRICT_JSON.decode(content)`; one object with no space around it (nearly every reply)
    is scanned at once; any other, and any error, goes through `decode` (its own wording)."""
    if content.startswith("{") and content.endswith("}"):
        try:
            data, end = _SCAN_STRICT(content, 0)
        except (ValueError, StopIteration):  # malformed: `decode` says how, in its words
            return _STRICT_JSON.decode(content)
        if end == len(content):
            return data
    return _STRICT_JSON.decode(content)


_SCAN_STRICT = _STRICT_JSON.scan_once  # type: ignore[attr-defined]


BARE_GRADE_NOTE = "reply read leniently: the grade alone, without its final line's words"


def _parse_final_line(
    content: str, spec: PromptSpec
) -> tuple[int, str | None, int | None, list[str] | None]:
    """The grade of a text reply, its reason, the grade's offset, and notes; a bare number is
    that grade (small models answer `3` to `Grade: N`), read with a note, not asked again."""
    lines = content.rstrip().splitlines()
    last = lines[-1] if lines else ""
    bare = re.fullmatch(r"\s*[*`]*\s*(-?[0-9]+)\s*[*`]*\s*", content)
    match = bare or spec.final_line_pattern().match(last.strip().strip("*`").strip())
    expected = spec.final_line.replace("$grade", "N")
    if match is None:
        raise InvalidReply(
            "no_final_line", f"the reply must end with a final line `{expected}` (N = 0, 1, 2 or 3)"
        )
    written = match.group(1)
    if not re.fullmatch(r"-?[0-9]+", written):
        raise InvalidReply("out_of_range", f"grade {written} is not one of 0, 1, 2, 3")
    grade = int(written)
    line_start = len(content.rstrip()) - len(last)
    offset = line_start + last.rfind(written)
    reason = "\n".join(lines[:-1]).strip() or None
    return grade, reason, offset, [BARE_GRADE_NOTE] if bare else None
