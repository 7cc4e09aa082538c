"""Replies of the fake OpenAI-compatible server: scripted faults and chat.completion bodies.

Pure functions, so a fake Batch API can build the same bodies the live fake sends. The server
itself is `tests.fakeserver.FakeServer` (which re-exports everything here).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

GRADE_TOKENS = ("0", "1", "2", "3")


# ---------------------------------------------------------------------------------------------
# Faults


@dataclass(frozen=True)
class Fault:
    """One scripted misbehaviour, consumed by one request. Build them with the functions below."""

    kind: str
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    delay_s: float = 0.0
    content: str | None = None
    grade: int | None = None
    refusal: str | None = None
    finish_reason: str = "stop"


class faults:
    """Constructors for every fault the judge must survive."""

    @staticmethod
    def rate_limited(retry_after: str | None = "1", *, retry_after_ms: str | None = None) -> Fault:
        headers = {}
        if retry_after is not None:
            headers["retry-after"] = retry_after
        if retry_after_ms is not None:
            headers["retry-after-ms"] = retry_after_ms
        return faults.error(429, "Rate limit reached for requests", "rate_limit_exceeded", headers)

    @staticmethod
    def server_error(status: int = 500) -> Fault:
        return faults.error(status, f"The server had an error ({status})", None)

    @staticmethod
    def error(
        status: int,
        message: str,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Fault:
        """Any HTTP error with an OpenAI-style error body (e.g. 401, 404)."""
        body = {"error": {"message": message, "type": "error", "param": None, "code": code}}
        return Fault("status", status=status, headers=headers or {}, body=body)

    @staticmethod
    def reject_response_format(kind: str = "json_schema") -> Fault:
        """The 400 that vLLM/Ollama-style servers send for an unsupported response_format."""
        message = f"Invalid value for 'response_format': {kind} is not supported by this server"
        return faults.error(400, message, "invalid_response_format")

    @staticmethod
    def slow(seconds: float) -> Fault:
        """A valid reply, but only after `seconds` (past the client's timeout)."""
        return Fault("slow", delay_s=seconds)

    @staticmethod
    def trickle(interval_s: float = 0.2) -> Fault:
        """A valid reply whose body comes one byte every `interval_s` (each read is quick, the
        whole reply is not)."""
        return Fault("trickle", delay_s=interval_s)

    @staticmethod
    def trickle_headers(interval_s: float = 0.5) -> Fault:
        """A status line and headers sent one byte every `interval_s`, never ending."""
        return Fault("trickle_headers", delay_s=interval_s)

    @staticmethod
    def endless_body() -> Fault:
        """A 200 whose body never ends (as fast as the client reads it)."""
        return Fault("endless_body")

    @staticmethod
    def hang() -> Fault:
        """Accept the request and never answer (until the server stops)."""
        return Fault("hang")

    @staticmethod
    def drop() -> Fault:
        """Close the socket without any reply."""
        return Fault("drop")

    @staticmethod
    def not_json_body() -> Fault:
        """A 200 whose body is an HTML page, not JSON."""
        return Fault("not_json_body", body="<html><body>502 Bad Gateway</body></html>")

    @staticmethod
    def content(text: str, *, finish_reason: str = "stop") -> Fault:
        """A well-formed completion whose message content is exactly `text`."""
        return Fault("content", content=text, finish_reason=finish_reason)

    @staticmethod
    def malformed_json() -> Fault:
        return Fault("malformed_json", content="{'reason': 'single quotes', grade: 2")

    @staticmethod
    def bad_grade(grade: int = 7) -> Fault:
        """A well-formed reply (in the asked mode) whose grade is outside 0..3."""
        return Fault("bad_grade", grade=grade)

    @staticmethod
    def grade(grade: int) -> Fault:
        """A valid reply with this grade (overrides the deterministic default once)."""
        return Fault("grade", grade=grade)

    @staticmethod
    def truncated() -> Fault:
        """finish_reason "length" with the content cut in the middle."""
        return Fault("truncated", finish_reason="length")

    @staticmethod
    def refusal(text: str = "I'm sorry, but I can't help with that request.") -> Fault:
        return Fault("refusal", refusal=text)


# ---------------------------------------------------------------------------------------------
# The default responder (pure functions, reusable by a fake Batch API)


def request_text(body: dict[str, Any]) -> str:
    """All message text of a chat request, concatenated (what the default grade hashes)."""
    parts: list[str] = []
    for message in body.get("messages", []):
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return "\n".join(parts)


def default_grade(body: dict[str, Any]) -> int:
    """A grade that depends only on the request's first user message (stable across re-asks)."""
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    text = str(users[0].get("content", "")) if users else request_text(body)
    return hashlib.sha256(text.encode("utf-8")).digest()[0] % 4


def output_mode(body: dict[str, Any]) -> str:
    """ "json_schema", "json_object" or "text", from the request's response_format."""
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") in ("json_schema", "json_object"):
        return str(fmt["type"])
    if any(name in body for name in ("structured_outputs", "guided_json", "format")):
        return "json_object"  # vLLM's and Ollama's own fields: a JSON reply
    return "text"


def reply_content(mode: str, grade: int, reason: str = "Scripted by the fake server.") -> str:
    """The message content a well-behaved model would send for `grade` in `mode`."""
    if mode == "text":
        return f"{reason}\nGrade: {grade}"
    return json.dumps({"reason": reason, "grade": grade})


def grade_probabilities(grade: int) -> dict[str, float]:
    """Top alternatives of the grade token: the chosen grade most likely, then its neighbours,
    plus one non-grade token (which a client must ignore when renormalising)."""
    probs = {str(g): 0.02 for g in range(4)}
    probs[str(grade)] = 0.8
    for near in (grade - 1, grade + 1):
        if 0 <= near <= 3:
            probs[str(near)] = 0.07
    probs['"'] = 0.01
    return probs


def _token(text: str, logprob: float, top: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "token": text,
        "logprob": logprob,
        "bytes": list(text.encode("utf-8")),
        "top_logprobs": top or [],
    }


def logprobs_for(content: str, grade_offset: int | None, top_n: int) -> dict[str, Any]:
    """Logprobs content: the text split around the grade digit, the digit with `top_n`
    alternatives. Without a grade digit, one token for the whole text."""
    if grade_offset is None:
        return {"content": [_token(content, -0.1)], "refusal": None}
    digit = content[grade_offset]
    probs = grade_probabilities(int(digit)) if digit in GRADE_TOKENS else {digit: 0.9}
    ranked = sorted(probs.items(), key=lambda kv: -kv[1])[: max(top_n, 1)]
    top = [_token(tok, math.log(p)) for tok, p in ranked]
    tokens = []
    if grade_offset > 0:
        tokens.append(_token(content[:grade_offset], -0.05))
    tokens.append(_token(digit, math.log(probs[digit]), top if top_n > 0 else []))
    if grade_offset + 1 < len(content):
        tokens.append(_token(content[grade_offset + 1 :], -0.05))
    return {"content": tokens, "refusal": None}


def _grade_offset(content: str, mode: str) -> int | None:
    pattern = r"Grade:\s*(\d)" if mode == "text" else r'"grade"\s*:\s*(\d)'
    found = list(re.finditer(pattern, content))
    return found[-1].start(1) if found else None


def completion(
    body: dict[str, Any],
    *,
    content: str | None,
    finish_reason: str = "stop",
    refusal: str | None = None,
    cached_tokens: int | None = 0,
    with_logprobs: bool = True,
) -> dict[str, Any]:
    """A full chat.completion body around `content`, with usage and (when asked) logprobs;
    `cached_tokens` None leaves `prompt_tokens_details` out of the usage."""
    mode = output_mode(body)
    prompt_tokens = max(1, len(request_text(body)) // 4)
    completion_tokens = max(1, len(content or refusal or "") // 4)
    logprobs = None
    if body.get("logprobs") and with_logprobs and content is not None:
        logprobs = logprobs_for(
            content, _grade_offset(content, mode), int(body.get("top_logprobs") or 0)
        )
    usage: dict[str, Any] = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }
    if cached_tokens is not None:
        usage["prompt_tokens_details"] = {
            "cached_tokens": min(cached_tokens, prompt_tokens),
            "audio_tokens": 0,
        }
    return {
        "id": "chatcmpl-" + hashlib.sha1(os_random()).hexdigest()[:24],
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake-model"),
        "system_fingerprint": "fp_fake",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": content,
                    "refusal": refusal,
                    "annotations": [],
                },
                "logprobs": logprobs,
                "finish_reason": finish_reason,
            }
        ],
        "usage": usage,
    }


_counter = iter(range(1, 1 << 62))
_counter_lock = threading.Lock()


def os_random() -> bytes:
    """Unique bytes per call (ids need only be distinct, not secret)."""
    with _counter_lock:
        return f"{time.time_ns()}-{next(_counter)}".encode()
