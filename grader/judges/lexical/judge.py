"""The offline judge `lexical`: a deterministic BM25-style term-overlap BASELINE, not an LLM.

BM25 over the query's terms (collection statistics from the judge's documents), divided by the
largest score those terms could reach, so one set of ascending thresholds serves every query: grade
= how many thresholds the score reaches. Settings live in a TOML file; the fingerprint holds them,
the algorithm version and a digest of the collection.
"""

from __future__ import annotations

import hashlib
import math
import re
import time
from collections import Counter
from collections.abc import Iterable, Mapping
from functools import cached_property, lru_cache
from typing import Any, NamedTuple

import numpy as np

from grader.errors import InputError
from grader.judges.base import failed, ok
from grader.judges.lexical.config import (
    LexicalConfig,
    default_settings_sha256,
    load_lexical_config,
)
from grader.models import Doc, Judgment, JudgmentError, PromptRef, Query

ALGORITHM_VERSION = "bm25-max-normalised/1"
JUDGE_ID = "lexical"

_WORD = re.compile(r"[^\W_]+")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_VOWELS = frozenset("aeiouy")


def light_stem(token: str) -> str:
    """Fold plurals, -ing, -ed and a final -e so `caches`, `caching`, `cached` meet at `cach`."""
    t = token
    if len(t) > 4 and t.endswith(("ies", "ied")):
        t = t[:-3] + "y"
    elif t.endswith("sses"):
        t = t[:-2]
    elif len(t) > 3 and t.endswith("s") and not t.endswith(("ss", "us", "is")):
        t = t[:-1]
    for suffix in ("ing", "ed"):
        stem = t[: -len(suffix)]
        if t.endswith(suffix) and len(stem) >= 3 and _VOWELS & set(stem):
            t = stem
            if len(t) > 3 and t[-1] == t[-2] and t[-1] not in "lsz" and t[-1] not in _VOWELS:
                t = t[:-1]
            break
    if len(t) > 3 and t.endswith("e"):
        t = t[:-1]
    return t


def tokenize(text: str, config: LexicalConfig) -> list[str]:
    """The scored terms of `text` under `config` (identifiers split, stopwords out, stemmed)."""
    stopwords = config.stopword_set
    stem = config.stemmer == "light"
    out: list[str] = []
    for word in _WORD.findall(text):
        parts = _CAMEL.findall(word) if word.isascii() else [word]
        for part in parts:
            token = part.lower()
            if len(token) < config.min_token_length or token in stopwords:
                continue
            out.append(light_stem(token) if stem else token)
    return out


def scored_text(doc: Doc, fields: Iterable[str]) -> str:
    """The document fields the judge scores, joined by newlines (missing ones skipped)."""
    parts: list[str] = []
    for field in fields:
        value = getattr(doc, field) if field in ("text", "title") else doc.metadata.get(field)
        if isinstance(value, str) and value:
            parts.append(value)
    return "\n".join(parts)


class LexicalScore(NamedTuple):
    """A normalised score in [0, 1) and the query terms the document matched."""

    score: float
    matched: tuple[str, ...]
    terms: tuple[str, ...]


class LexicalJudge:
    """The `lexical` judge (see the module docstring): offline, deterministic, free."""

    def __init__(
        self, docs: Iterable[Doc] | Mapping[str, Doc], config: LexicalConfig | None = None
    ) -> None:
        """A judge whose collection statistics come from `docs`, counted at the first score."""
        self.config = config if config is not None else load_lexical_config()
        items = list(docs.values()) if isinstance(docs, Mapping) else list(docs)
        digest = hashlib.sha256()
        self._texts: dict[str, str] = {}
        for doc in sorted(items, key=lambda d: d.doc_id):
            text = self._texts[doc.doc_id] = scored_text(doc, self.config.doc_fields)
            digest.update(doc.doc_id.encode() + b"\0" + text.encode() + b"\0")
        self.collection_digest = "sha256:" + digest.hexdigest()
        self._query_terms = lru_cache(maxsize=4096)(self._terms_of)

    @cached_property
    def _counts(self) -> dict[str, tuple[Counter[str], int]]:
        """Each document's term counts and scored length (counted on first use)."""
        counted = {d: Counter(tokenize(t, self.config)) for d, t in self._texts.items()}
        return {d: (c, sum(c.values())) for d, c in counted.items()}

    @cached_property
    def avg_length(self) -> float:
        """Mean scored length (tokens) of the collection's documents."""
        lengths = [n for _, n in self._counts.values()]
        return sum(lengths) / len(lengths) if lengths else 0.0

    @cached_property
    def doc_freq(self) -> dict[str, int]:
        """Document frequency of each term in the collection."""
        return dict(Counter(t for counts, _ in self._counts.values() for t in counts))

    @cached_property
    def judge_id(self) -> str:
        """`lexical` with the shipped settings, `lexical+<sha8>` with any other (e.g. fitted), so
        default and fitted grades never share a content key (hashed once: the config is frozen)."""
        sha = self.config.sha256
        return JUDGE_ID if sha == default_settings_sha256() else f"{JUDGE_ID}+{sha[:8]}"

    def fingerprint(self) -> dict[str, Any]:
        """Settings, thresholds, algorithm version and collection digest: all that moves a grade."""
        return {
            "judge": self.judge_id,
            "algorithm": ALGORITHM_VERSION,
            "settings": self.config.settings(),
            "collection": self.collection_digest,
        }

    def idf(self, term: str) -> float:
        """BM25's idf, always positive: ln(1 + (N - df + 0.5) / (df + 0.5))."""
        df = self.doc_freq.get(term, 0)
        return math.log(1.0 + (len(self._counts) - df + 0.5) / (df + 0.5))

    def _terms_of(self, text: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(tokenize(text, self.config)))

    def _doc_counts(self, doc: Doc) -> tuple[Counter[str], int]:
        text = scored_text(doc, self.config.doc_fields)
        if self._texts.get(doc.doc_id) == text:
            return self._counts[doc.doc_id]
        counts = Counter(tokenize(text, self.config))
        return counts, sum(counts.values())

    def score(self, query_text: str, doc: Doc) -> LexicalScore:
        """The normalised BM25 score of `doc` for the query; NaN when the query has no terms."""
        terms = self._query_terms(query_text)
        if not terms:
            return LexicalScore(math.nan, (), ())
        counts, length = self._doc_counts(doc)
        k1, b = self.config.k1, self.config.b
        norm = 1.0 - b + b * (length / self.avg_length) if self.avg_length > 0 else 1.0
        top = got = 0.0
        matched: list[str] = []
        for term in terms:
            w = self.idf(term)
            top += w * (k1 + 1.0)
            tf = counts.get(term, 0)
            if tf:
                got += w * tf * (k1 + 1.0) / (tf + k1 * norm)
                matched.append(term)
        return LexicalScore(got / top, tuple(matched), terms)

    def grade_of(self, score: float) -> int:
        """How many thresholds `score` reaches: 0..3."""
        return sum(score >= t for t in self.config.thresholds)

    async def judge(self, query: Query, doc: Doc, *, key: str) -> Judgment:
        """Grade one pair; a query with no scorable terms gives a failed judgment, never a 0."""
        started = time.perf_counter()
        result = self.score(query.text, doc)
        common: dict[str, Any] = {"key": key, "prompt": self.prompt_ref, "attempts": 1, "cost": 0.0}
        common["latency_ms"] = (time.perf_counter() - started) * 1000.0
        if math.isnan(result.score):
            error = JudgmentError(
                type="NoQueryTerms",
                message="the lexical baseline found no scorable terms in the query "
                f"{query.text!r} (all stopwords or too short); it cannot grade it",
            )
            return failed(self, query, doc, error=error, **common)
        grade = self.grade_of(result.score)
        t1, t2, t3 = self.config.thresholds
        matched = ", ".join(result.matched) if result.matched else "none"
        reason = (  # how the grade came about, and that it is only a baseline
            "lexical baseline (BM25-style term overlap, not an LLM): "
            f"score {result.score:.3f} against thresholds {t1:.3f}/{t2:.3f}/{t3:.3f} "
            f"-> grade {grade}; matched {len(result.matched)} of {len(result.terms)} query "
            f"terms: {matched}"
        )
        return ok(self, query, doc, grade=grade, reason=reason, **common)

    @cached_property
    def prompt_ref(self) -> PromptRef:
        """The settings file as the judgment's provenance (`lexical@1`, sha of the settings)."""
        cfg = self.config
        return PromptRef(name=cfg.name, version=cfg.version, sha256=cfg.sha256)


def lexical_scores(
    queries: Mapping[str, Query],
    docs: Mapping[str, Doc],
    pairs: Iterable[tuple[str, str]],
    *,
    config: LexicalConfig | None = None,
) -> np.ndarray:
    """Normalised lexical scores of (query_id, doc_id) pairs, for fitting thresholds (or NaN)."""
    wanted = list(pairs)
    missing = [p for p in wanted if p[0] not in queries or p[1] not in docs]
    if missing:
        first = ", ".join(f"({q}, {d})" for q, d in missing[:3])
        raise InputError(
            f"{len(missing)} pair(s) name a query or document that is not loaded, e.g. {first}",
            hint="pass the queries and docs files the grades were made on",
        )
    judge = LexicalJudge(docs, config)
    return np.array(
        [judge.score(queries[q].text, docs[d]).score for q, d in wanted], dtype=np.float64
    )
