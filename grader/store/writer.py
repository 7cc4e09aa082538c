"""Batched writes of judgments and call records to the store, for the grading pipeline."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from grader.models import CallRecord, Judgment
from grader.store.store import Store

FLUSH_SIZE = 64


class StoreWriter:
    """Buffers judgments and call records and commits them in small batches.

    `flush()` is called by the pipeline at least every `FLUSH_INTERVAL_S` seconds and whenever
    `FLUSH_SIZE` items wait, so a crash loses at most that much. Pass `log_call` as the judge's
    `on_call` so every HTTP attempt lands in the store's call log.
    """

    def __init__(self, store: Store | None, *, flush_size: int = FLUSH_SIZE) -> None:
        self.store = store
        self.flush_size = flush_size
        self._judgments: list[tuple[Judgment, Mapping[str, Any] | None]] = []
        self._calls: list[CallRecord] = []
        self._lock = threading.Lock()
        self.written = 0

    def add(self, judgment: Judgment, fingerprint: Mapping[str, Any] | None) -> None:
        """Queue one judgment for the store."""
        with self._lock:
            self._judgments.append((judgment, fingerprint))
            full = len(self._judgments) >= self.flush_size
        if full:
            self.flush()

    def log_call(self, record: CallRecord) -> None:
        """Queue one HTTP attempt for the call log (the judge's `on_call`)."""
        with self._lock:
            self._calls.append(record)

    def flush(self) -> None:
        """Commit everything queued, in one transaction each for judgments and calls."""
        with self._lock:
            judgments, self._judgments = self._judgments, []
            calls, self._calls = self._calls, []
        if self.store is None:
            return
        if judgments:
            self.store.put_many(judgments)
            self.written += len(judgments)
        if calls:
            self.store.log_calls(calls)
