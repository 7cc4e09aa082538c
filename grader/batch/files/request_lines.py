"""Request lines built fast, byte for byte what `request_line(custom_id,
judge.build_request(query, doc))` gives: a frame serialized once with marks, cut at them, and
each pair's three strings JSON-encoded into it. Every `CHECK_EVERY`-th line is also built the
slow way and compared; should they differ, the slow way is used from then on."""

from __future__ import annotations

import secrets
from json.encoder import encode_basestring

from grader.batch.adapter import LLMBatchJudge
from grader.batch.requests import request_line
from grader.keys import json_string
from grader.models import Doc, Query
from grader.prompts import MessageRenderer

CHECK_EVERY = 1000


class RequestLines:
    """The request lines of one judge (in its batch output mode); see the module docstring."""

    def __init__(self, judge: LLMBatchJudge) -> None:
        self.judge = judge
        live = judge.live
        self.renderer = MessageRenderer(live.prompt, judge.mode)
        probe, _ = self.renderer.messages(Query(query_id="q", text="q"), Doc(doc_id="d", text="d"))
        token = secrets.token_hex(8)
        marks = [f"@relgrade-mark-{i}-{token}@" for i in range(len(probe) + 1)]
        messages = [{**m, "content": marks[i + 1]} for i, m in enumerate(probe)]
        body = live.server.body(live.prompt, live.model, messages, judge.mode)
        text = request_line(marks[0], body).decode("utf-8")
        pieces: list[str] = []
        self._exact = True  # False: the frame could not be cut, or a line differed
        for mark in marks:
            quoted = encode_basestring(mark)
            before, found, text = text.partition(quoted)
            self._exact = self._exact and bool(found) and quoted not in text
            pieces.append(before)
        pieces.append(text)
        self._pieces = tuple(p.encode("utf-8") for p in pieces)
        self._exact = self._exact and len(probe) == 2  # `contents` gives system and user
        self._count = 0
        self._last_system: str | None = None
        self._last_encoded = b""
        self.slow_lines = 0  # lines built the slow way (none while the frame holds)

    def line(self, custom_id: str, query: Query, doc: Doc) -> bytes:
        """The request line (UTF-8, newline included) of one pair under `custom_id`."""
        self._count += 1
        if not self._exact:
            return self._slow(custom_id, query, doc)
        system, user, _ = self.renderer.contents(query, doc)
        if system is not self._last_system:
            self._last_system, self._last_encoded = system, json_string(system)
        pieces = self._pieces
        parts = [
            pieces[0],
            json_string(custom_id),
            pieces[1],
            self._last_encoded,
            pieces[2],
            json_string(user),
            pieces[3],
        ]
        line = b"".join(parts)
        if self._count % CHECK_EVERY == 1:
            exact = request_line(custom_id, self.judge.build_request(query, doc))
            if line != exact:
                self._exact = False
                self.slow_lines += 1
                return exact
        return line

    def _slow(self, custom_id: str, query: Query, doc: Doc) -> bytes:
        self.slow_lines += 1
        return request_line(custom_id, self.judge.build_request(query, doc))
