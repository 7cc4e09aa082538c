"""Content keys: sha256 of the canonical JSON of the judge's fingerprint and the query and document
text. A rerun with nothing changed finds every key; a changed prompt or model changes its keys."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import msgspec


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no insignificant whitespace: equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def json_string(text: str) -> bytes:
    """`text` as a JSON string, UTF-8, as `json.dumps(text, ensure_ascii=False)` (msgspec)."""
    return msgspec.json.encode(text)


def content_key(fingerprint: dict[str, Any], query_text: str, doc_text: str) -> str:
    """The store key of grading `doc_text` for `query_text` with the judge of `fingerprint`."""
    return ContentKeys(fingerprint).key(query_text, doc_text)


class ContentKeys:
    """Content keys under one fingerprint: sha256 of `{"document", "judge", "query"}` as canonical
    JSON, each distinct text encoded once (tests/test_grade_scale.py, bench/grade_scale.py)."""

    def __init__(self, fingerprint: dict[str, Any]) -> None:
        self._middle = (',"judge":' + canonical_json(fingerprint) + ',"query":').encode("utf-8")
        self._docs: dict[str, hashlib._Hash] = {}
        self._queries: dict[str, bytes] = {}

    def key(self, query_text: str, doc_text: str) -> str:
        """The content key of (query_text, doc_text) under this fingerprint."""
        return "sha256:" + self.digest(query_text, doc_text).hex()

    def digest(self, query_text: str, doc_text: str) -> bytes:
        """The 32 bytes of the content key (what the store keeps)."""
        prefix = self._docs.get(doc_text)
        if prefix is None:
            prefix = hashlib.sha256(b'{"document":' + json_string(doc_text) + self._middle)
            self._docs[doc_text] = prefix
        query = self._queries.get(query_text)
        if query is None:
            query = self._queries[query_text] = json_string(query_text) + b"}"
        whole = prefix.copy()
        whole.update(query)
        return whole.digest()
