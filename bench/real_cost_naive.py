"""The naive client of bench/real_cost.py: one openai SDK request per pair asking for a reason
then a `Grade: N` line, the grade read from the reply's last `Grade: N` (or a reply that is
nothing but the digit). A reply without one is a failure (grade None), never a 0."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from grader.models import Doc, Query
from grader.prompts.files import load_prompt
from grader.prompts.render import MessageRenderer

_GRADE = re.compile(r"\bgrade\W{0,6}(\d+)\b", re.IGNORECASE)


@dataclass
class NaiveAnswer:
    """One pair's answer: the grade (None when the reply had none), what it cost, and why not."""

    grade: int | None
    prompt_tokens: int
    completion_tokens: int
    seconds: float
    error: str | None = None


def parse_grade(reply: str | None) -> int | None:
    """The reply's last `Grade: N`, or N when the reply is nothing else; None unless N is 0..3."""
    text = (reply or "").strip()
    found = _GRADE.findall(text)
    raw = found[-1] if found else text.strip("*. ")
    return int(raw) if raw in ("0", "1", "2", "3") else None


def naive_messages(
    query: str, passage: str, *, pair_first: bool = False, prompt: str = "passage-v1"
) -> list[dict[str, str]]:
    """`prompt`'s instructions and scale (system message), then the pair and the plain-text reply
    format, a reason then `Grade: N` (user message), as a user writes it; with `pair_first` one
    user message, the pair before everything else (nothing shared from request to request)."""
    renderer = MessageRenderer(load_prompt(prompt), "text")
    pair = Doc(doc_id="d", text=passage)
    system, user, _ = renderer.contents(Query(query_id="q", text=query), pair)
    rules = system.removesuffix(renderer.instruction).rstrip()
    if pair_first:
        return [{"role": "user", "content": f"{user}\n\n{rules}\n\n{renderer.instruction}"}]
    user = f"{user}\n\n{renderer.instruction}"
    return [{"role": "system", "content": rules}, {"role": "user", "content": user}]


def ask(client: Any, model: str, messages: list[dict[str, str]], max_tokens: int) -> NaiveAnswer:
    """One chat completion at temperature 0, timed; the grade parsed from its text."""
    started = time.monotonic()
    try:
        reply = client.chat.completions.create(
            model=model, messages=messages, temperature=0.0, max_tokens=max_tokens
        )
    except Exception as exc:  # the bench counts a failed request as a failure, like relgrade
        return NaiveAnswer(None, 0, 0, time.monotonic() - started, f"{type(exc).__name__}: {exc}")
    took = time.monotonic() - started
    usage = reply.usage
    text = reply.choices[0].message.content if reply.choices else None
    grade = parse_grade(text)
    error = None if grade is not None else f"no `Grade: N` line in {text!r:.80}"
    prompt_tokens = usage.prompt_tokens if usage else 0
    return NaiveAnswer(grade, prompt_tokens, usage.completion_tokens if usage else 0, took, error)
