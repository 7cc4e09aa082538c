"""The rows the store writes for judgments and calls, secrets masked: a mixin of
`grader.store.store.Store`. `stored_row(s)` make a judgment's row through the one encoder
(`grader.store.judgment_rows.encode`; the live path and an import's workers); `rows` makes the
rows the journal keeps while the store is busy (`Store.write_rows` stores them later).
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
    Source,
    StoredRow,
    encode,
    replaceable,
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
            replaceable(judgment),
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
        """The rows the store writes of these judgments (`encode`, secrets masked), each
        fingerprint's source made once."""
        sources: dict[tuple[int, str, PromptRef | None], tuple[Any, Source]] = {}
        out = []
        for judgment, fingerprint in items:
            known = sources.get((id(fingerprint), judgment.judge, judgment.prompt))
            if known is None or known[0] is not fingerprint:
                model = fingerprint.get("model") if fingerprint is not None else None
                text = self._fingerprint_text(fingerprint) if fingerprint is not None else None
                model = None if model is None else str(model)
                source = sources_for(judgment.judge, model, judgment.prompt, text)
                known = (fingerprint, source)
                sources[(id(fingerprint), judgment.judge, judgment.prompt)] = known
            out.append(self.stored_row(vars(judgment), known[1], replaceable(judgment)))
        return out

    def stored_row(
        self, fields: Mapping[str, Any], source: Source, replaceable: int = 0
    ) -> StoredRow:
        """The row the store writes of a judgment with these fields by name (`encode`; the rest at
        the model's defaults), secrets masked, from `source`: an import makes a million without the
        Judgment."""
        columns = encode(fields)
        if self._secrets:
            columns = (*columns[:6], self._mask(columns[6]))
        return StoredRow(columns, source, replaceable)

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
