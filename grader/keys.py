"""Content keys: what makes two judgments the same judgment.

The key is sha256 of the canonical JSON (sorted keys, no spaces, UTF-8) of the judge's fingerprint
(judge id, model, prompt sha, sampling params) and the query and document text. A rerun with
nothing changed finds every key in the store; a changed prompt or model changes exactly the keys
it touches.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no insignificant whitespace: equal values give equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def tagged_sha256(text: str) -> str:
    """`sha256:<hex>` of the UTF-8 text."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def content_key(fingerprint: dict[str, Any], query_text: str, doc_text: str) -> str:
    """The store key of grading `doc_text` for `query_text` with the judge of `fingerprint`."""
    payload = {"judge": fingerprint, "query": query_text, "document": doc_text}
    return tagged_sha256(canonical_json(payload))
