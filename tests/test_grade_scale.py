"""Grading at scale (issue 12): faster content keys, a lexical index built only when something is
graded, and reruns that decide "already stored" without loading judgments; all give the same
keys, grades and outputs as before."""

from __future__ import annotations

import asyncio
import hashlib
import random
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grader.judges.lexical.config import load_lexical_config
from grader.judges.lexical.judge import LexicalJudge, scored_text, tokenize
from grader.keys import ContentKeys, canonical_json
from grader.models import Doc, Query

FINGERPRINTS = [
    {"judge": "lexical", "settings": {"k1": 1.2, "stopwords": ["a", "é"]}, "collection": None},
    {"judge": "openai:m", "model": "m", "prompt": "ab" * 32, "sampling": {"temperature": 0}},
]


def content_key(fingerprint: dict[str, object], query: str, doc: str) -> str:
    """The key as the store defines it: sha256 of the canonical JSON, computed the plain way."""
    payload = canonical_json({"judge": fingerprint, "query": query, "document": doc})
    return "sha256:" + hashlib.sha256(payload.encode("utf-8")).hexdigest()


@given(
    st.sampled_from(FINGERPRINTS),
    st.lists(st.tuples(st.text(max_size=40), st.text(max_size=200)), min_size=1, max_size=8),
)
def test_content_keys_equal_content_key_for_any_texts(
    fingerprint: dict[str, object], texts: list[tuple[str, str]]
) -> None:
    maker = ContentKeys(fingerprint)
    for _ in range(2):  # the second pass reads the cached encodings
        for query, doc in texts:
            assert maker.key(query, doc) == content_key(fingerprint, query, doc)


_any_char = st.characters(exclude_categories=())  # surrogates and control characters too
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(_any_char),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(_any_char), inner),
    max_leaves=8,
)


@given(
    st.dictionaries(st.text(_any_char, max_size=8), _json_values, max_size=4),
    st.lists(st.tuples(st.text(_any_char), st.text(_any_char)), min_size=1, max_size=6),
)
def test_content_keys_equal_content_key_or_raise_alike(
    fingerprint: dict[str, object], texts: list[tuple[str, str]]
) -> None:
    """Any fingerprint JSON can hold, any texts (a lone surrogate: both raise); `digest` is the
    key's bytes."""
    try:
        maker = ContentKeys(fingerprint)
    except UnicodeEncodeError:
        with pytest.raises(UnicodeEncodeError):
            content_key(fingerprint, "", "")
        return
    for query, doc in texts * 2:  # the second pass reads the cached encodings
        try:
            expected = content_key(fingerprint, query, doc)
        except UnicodeEncodeError:
            with pytest.raises(UnicodeEncodeError):
                maker.key(query, doc)
            continue
        assert maker.key(query, doc) == expected
        assert maker.digest(query, doc) == bytes.fromhex(expected.removeprefix("sha256:"))


def _docs(n: int, seed: int = 3) -> list[Doc]:
    rng = random.Random(seed)
    words = ["cache", "caching", "eviction", "policies", "retry", "sqlite", "the", "index", "wal"]
    return [
        Doc(doc_id=f"d{i}", text=" ".join(rng.choices(words, k=rng.randint(3, 30))))
        for i in range(n)
    ]


def test_lexical_statistics_are_counted_when_first_needed_and_equal_an_eager_count() -> None:
    config = load_lexical_config()
    docs = _docs(200)
    judge = LexicalJudge(docs, config)
    # Nothing tokenised yet: a run whose pairs are all stored never pays for the index.
    assert "_counts" not in vars(judge)
    # The fingerprint (so every key) needs only the digest of the collection.
    digest = hashlib.sha256()
    for doc in sorted(docs, key=lambda d: d.doc_id):
        text = scored_text(doc, config.doc_fields)
        digest.update(doc.doc_id.encode() + b"\0" + text.encode() + b"\0")
    assert judge.fingerprint()["collection"] == "sha256:" + digest.hexdigest()
    assert "_counts" not in vars(judge)
    # Counted on first use, from every document, as an eager count gives.
    counts = [Counter(tokenize(scored_text(d, config.doc_fields), config)) for d in docs]
    doc_freq: Counter[str] = Counter()
    for c in counts:
        doc_freq.update(c.keys())
    eager = LexicalJudge(docs, config)
    assert eager.doc_freq == dict(doc_freq) and len(eager._counts) == len(docs)  # counted first
    assert eager.avg_length == sum(sum(c.values()) for c in counts) / len(docs)
    query = Query(query_id="q", text="cache eviction policy")
    lazy_grades = [asyncio.run(judge.judge(query, d, key="k")).grade for d in docs]
    eager_grades = [asyncio.run(eager.judge(query, d, key="k")).grade for d in docs]
    assert "_counts" in vars(judge)
    assert judge.doc_freq == dict(doc_freq) and len(judge._counts) == len(docs)
    assert judge.avg_length == eager.avg_length
    assert lazy_grades == eager_grades
    assert len(set(lazy_grades)) > 1  # the pairs span several grades
