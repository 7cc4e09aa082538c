"""The rows the store writes for judgments and calls, secrets masked: a mixin of
`grader.store.store.Store`. `rows` makes the judgments' rows as the journal keeps them (a busy
store writes them later, `Store.write_rows`); `stored_rows` makes them in parts, as schema 8
keeps them (an import's workers, `Store.write_stored`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from grader.models import CallRecord, Judgment, PromptRef
from grader.redact import redact
from grader.store.journal import Rows
from grader.store.judgment_rows import (
    JudgmentParts,
    Source,
    StoredRow,
    encode_key,
    in_parts,
    source_of,
    sources_for,
)


def now_text() -> str:
    """The time now (UTC, ISO 8601), as the store's rows record it."""
    return datetime.now(UTC).isoformat()


class StoreRows:
    """The row-making methods of `Store` (see the module docstring)."""

    _secrets: tuple[str, ...]
    _sources: dict[int, tuple[Mapping[str, Any], tuple[str, PromptRef | None], Source]]

    def add_secrets(self, secrets: Sequence[str]) -> None:
        """Also mask these strings (e.g. an API key known only after opening) in what is written."""
        self._secrets = tuple(dict.fromkeys([*self._secrets, *(s for s in secrets if s)]))
        self._sources.clear()  # their fingerprints' JSON is masked again when next asked

    def _mask(self, text: str) -> str:
        return redact(text, self._secrets)

    def _judgment_rows(
        self, items: Iterable[tuple[Judgment, Mapping[str, Any] | None]]
    ) -> list[tuple[Any, ...]]:
        """`_judgment_row` of each item, each fingerprint's JSON made once per call (a judge
        passes the same fingerprint with every answer)."""
        texts: dict[int, tuple[Mapping[str, Any], str]] = {}
        rows = []
        for judgment, fingerprint in items:
            text = None
            if fingerprint is not None:
                known = texts.get(id(fingerprint))
                if known is None or known[0] is not fingerprint:
                    known = texts[id(fingerprint)] = (
                        fingerprint,
                        self._fingerprint_text(fingerprint),
                    )
                text = known[1]
            rows.append(self._judgment_row(judgment, fingerprint, text))
        return rows

    def _fingerprint_text(self, fingerprint: Mapping[str, Any]) -> str:
        return self._mask(json.dumps(fingerprint, sort_keys=True))

    def _judgment_row(
        self,
        judgment: Judgment,
        fingerprint: Mapping[str, Any] | None,
        fingerprint_text: str | None = None,
    ) -> tuple[Any, ...]:
        prompt = judgment.prompt
        model = None
        if fingerprint is not None:
            model = fingerprint.get("model")
            if fingerprint_text is None:
                fingerprint_text = self._fingerprint_text(fingerprint)
        return (
            judgment.key,
            judgment.query_id,
            judgment.doc_id,
            judgment.judge,
            None if model is None else str(model),
            prompt.name if prompt else None,
            prompt.version if prompt else None,
            prompt.sha256 if prompt else None,
            judgment.status,
            judgment.grade,
            judgment.created_at.isoformat(),
            fingerprint_text,
            self._mask(judgment.model_dump_json()),
            # An output built from answers may be replaced by a newer ok one (see _UPSERT).
            int(judgment.judges is not None or judgment.verification is not None),
        )

    def _call_row(self, record: CallRecord) -> tuple[Any, ...]:
        message = record.error_message
        return (
            record.key,
            record.attempt,
            record.outcome,
            record.http_status,
            record.latency_ms,
            record.usage.prompt_tokens,
            record.usage.completion_tokens,
            record.usage.cached_tokens,
            record.error_type,
            None if message is None else self._mask(message),
            now_text(),
            record.output_mode,
        )

    def rows(
        self,
        judgments: Iterable[tuple[Judgment, Mapping[str, Any] | None]],
        calls: Iterable[CallRecord] = (),
    ) -> Rows:
        """The rows the store would write for these judgments and calls (secrets masked), to
        keep in the journal until `write_rows` stores them."""
        return Rows(self._judgment_rows(judgments), [self._call_row(c) for c in calls])

    def stored_rows(
        self, items: Iterable[tuple[Judgment, Mapping[str, Any] | None]]
    ) -> list[StoredRow]:
        """What `stored_row` makes of `rows()`'s judgment rows, without those rows in between
        (an import's workers make a million): for `write_stored`."""
        sources: dict[tuple[int, str, PromptRef | None], tuple[Any, Source]] = {}
        out = []
        for judgment, fingerprint in items:
            known = sources.get((id(fingerprint), judgment.judge, judgment.prompt))
            if known is None or known[0] is not fingerprint:
                model = fingerprint.get("model") if fingerprint is not None else None
                text = self._fingerprint_text(fingerprint) if fingerprint is not None else None
                known = (fingerprint, source_of(judgment, model, text))
                sources[(id(fingerprint), judgment.judge, judgment.prompt)] = known
            out.append(
                in_parts(
                    judgment.key,
                    judgment.query_id,
                    judgment.doc_id,
                    judgment.status,
                    judgment.grade,
                    self._mask(judgment.model_dump_json()),
                    known[1],
                    int(judgment.judges is not None or judgment.verification is not None),
                )
            )
        return out

    def source_for(
        self, judge: str, prompt: PromptRef | None, fingerprint: Mapping[str, Any]
    ) -> Source:
        """The source row of a judge's judgments (its fingerprint's JSON masked), made once
        for the same judge, prompt and fingerprint objects."""
        known = self._sources.get(id(fingerprint))
        if known is None or known[0] is not fingerprint or known[1] != (judge, prompt):
            model = fingerprint.get("model")
            text = self._fingerprint_text(fingerprint)
            source = sources_for(judge, None if model is None else str(model), prompt, text)
            known = self._sources[id(fingerprint)] = (fingerprint, (judge, prompt), source)
        return known[2]

    def ok_row(
        self, key: str, query_id: str, doc_id: str, grade: int, parts: JudgmentParts, source: Source
    ) -> StoredRow | None:
        """The row `stored_rows` makes of an ok Judgment whose JSON has these `parts`
        (`ok_parts`), from `source` (`source_for`), without the Judgment: an import's workers
        make a million. None when a secret to mask occurs in it: make the Judgment then."""
        if self._secrets and any(
            s in text
            for s in self._secrets
            for text in (key, query_id, doc_id, parts.head, parts.tail)
        ):
            return None
        head, tail, created_at, _ = parts
        columns = (encode_key(key), query_id, doc_id, "ok", grade, created_at, head, tail, None)
        return tuple.__new__(StoredRow, (columns, source, 0))  # made in C, as in ok_parts
