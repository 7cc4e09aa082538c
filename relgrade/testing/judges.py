"""`check_judge`: a judge kind's fingerprint is stable and its answers come under the key asked."""

from __future__ import annotations

import asyncio

from grader.errors import JudgeError
from grader.judges.base import Judge, check_key
from grader.judges.registry import JudgeSettings, build_judges, judge_kind
from grader.keys import canonical_json, content_key
from grader.models import Doc, Judgment, Query

QUERY = Query(query_id="conformance-q1", text="how does the cache evict old entries")
DOC = Doc(
    doc_id="conformance-d1",
    text="The cache evicts the least recently used entry when it is full; old entries go first.",
)


def check_judge(
    kind: str,
    settings: JudgeSettings | None = None,
    *,
    query: Query = QUERY,
    doc: Doc = DOC,
) -> None:
    """Check the registered judge kind `kind` built from `settings` (default: no model, no
    endpoint, and `doc` as the collection for kinds that read every document): two builds give
    the same fingerprints and content keys, and each judge answers (query, doc) under the key it
    is asked with. AssertionError says what is wrong."""
    definition = judge_kind(kind)
    if settings is None:
        docs = {doc.doc_id: doc} if definition.needs_all_docs else {}
        settings = JudgeSettings(docs=docs)
    first, second = build_judges(kind, settings), build_judges(kind, settings)
    assert len(first) == len(second), f"judge {kind!r}: two builds made different numbers"
    for one, two in zip(first, second, strict=True):
        _check_fingerprint(kind, one, two, query, doc)
        key = content_key(one.fingerprint(), query.text, doc.text)
        judgment = asyncio.run(one.judge(query, doc, key=key))
        _check_answer(kind, one, judgment, key, query, doc)


def _check_fingerprint(kind: str, one: Judge, two: Judge, query: Query, doc: Doc) -> None:
    """The same settings, the same fingerprint, JSON-able, so the same content key."""
    try:
        text = canonical_json(one.fingerprint())
    except (TypeError, ValueError) as exc:
        raise AssertionError(f"judge {kind!r}: its fingerprint is not plain JSON ({exc})") from exc
    assert text == canonical_json(two.fingerprint()), (
        f"judge {kind!r}: two builds from the same settings have different fingerprints "
        f"({text} and {canonical_json(two.fingerprint())}): every rerun would grade again"
    )
    assert one.fingerprint() == one.fingerprint(), f"judge {kind!r}: fingerprint() changes"
    keys = {content_key(j.fingerprint(), query.text, doc.text) for j in (one, two)}
    assert len(keys) == 1, f"judge {kind!r}: two builds give two content keys"
    assert one.judge_id == two.judge_id, f"judge {kind!r}: two builds have two judge ids"


def _check_answer(
    kind: str, judge: Judge, judgment: Judgment, key: str, query: Query, doc: Doc
) -> None:
    """The answer is a Judgment under `key`, for (query, doc), by `judge`."""
    assert isinstance(judgment, Judgment), f"judge {kind!r} answered {type(judgment).__name__}"
    try:
        check_key(judge, judgment, key)
    except JudgeError as exc:
        raise AssertionError(f"judge {kind!r}: {exc}") from exc
    got = (judgment.query_id, judgment.doc_id, judgment.judge)
    wanted = (query.query_id, doc.doc_id, judge.judge_id)
    assert got == wanted, f"judge {kind!r}: answered for (query, doc, judge) {got}, not {wanted}"
