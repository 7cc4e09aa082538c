"""`relgrade batch export`: request files in the OpenAI batch format for any inference engine
(vLLM run-batch, Ray Data, ...), recorded in the store so any process can import the results.

Each line is `{"custom_id", "method", "url", "body"}`; the body is exactly what live grading
sends for the pair (the judge's `build_request`: same prompt rendering, schema and sampling;
made byte for byte by `grader.batch.request_lines` without a dict per line) and `custom_id` is
`relgrade:EXPORT_ID:KEY` (`grader.batch.exports`). Pairs whose key is already ok in the store
are not exported; pairs sharing a key (same texts) are one line, and every id pair is listed
under its key in the store, so outputs cover them all. Files are split under a line
and a byte limit (`grader.batch.requests.split_requests`'s limits), written to a temporary name
and renamed once complete, on a thread (`grader.batch.request_files`); each one's lines, bytes
and sha256 are recorded.

The work streams in chunks: memory does not grow with the number of lines (the pairs given may
be a generator); which keys the export already holds is asked of the store, not kept in memory.
"""

from __future__ import annotations

import contextlib
import gc
import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

from grader.batch.adapter import LLMBatchJudge
from grader.batch.exports import ExportState, LineRow, custom_id
from grader.batch.request_files import RequestFiles
from grader.batch.request_lines import RequestLines
from grader.batch.requests import MAX_BYTES_PER_FILE, MAX_REQUESTS_PER_FILE
from grader.errors import InputError
from grader.keys import ContentKeys
from grader.models import Doc, Query
from grader.store.store import Store, doc_row

CHUNK = 2000  # pairs per store lookup
BATCH_PAIRS = 20_000  # pairs whose texts, id pairs and lines are written in one go


@dataclass(frozen=True)
class LineProgress:
    """How far an export or import is: `lines` done of `total` (None: unknown) after
    `elapsed` seconds; `fraction` done when the total is known another way (bytes read)."""

    lines: int
    total: int | None
    elapsed: float
    fraction: float | None = None

    @property
    def per_second(self) -> float:
        return self.lines / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def eta(self) -> float | None:
        """Seconds left, when it can be told."""
        if self.elapsed <= 0 or self.lines == 0:
            return None
        if self.total is not None:
            return max(0.0, (self.total - self.lines) / self.per_second)
        if self.fraction:
            return max(0.0, self.elapsed * (1.0 - self.fraction) / self.fraction)
        return None


Progress = Callable[[LineProgress], None]


@dataclass
class ExportSummary:
    """What an export wrote: its id, request files, lines (one per content key) and the id
    pairs they cover; pairs left out because the store already holds their answer."""

    export_id: str
    files: list[Path]
    lines: int = 0
    pairs: int = 0
    stored: int = 0


class _Batch:
    """Texts, id pairs and request lines not yet written: written together every
    `BATCH_PAIRS` pairs (transactions of 2,000 random keys each cost twice as much a row),
    each table's rows in its key order (lines in file order), made as plain rows."""

    def __init__(self, store: Store, state: ExportState, export_id: str) -> None:
        self.store = store
        self.state = state
        self.export_id = export_id
        self._clear()

    def _clear(self) -> None:
        self.queries: dict[str, str] = {}
        self.docs: dict[str, Doc] = {}
        self.pairs: set[tuple[str, str, str]] = set()
        self.lines: list[LineRow] = []  # the lines written to files, not yet recorded
        self.keys: set[str] = set()  # their keys
        self.n_pairs = 0

    @property
    def size(self) -> int:
        return len(self.pairs)

    def add_texts(self, keyed: list[tuple[str, Query, Doc]]) -> None:
        """Keep every pair's texts and id pair (those already graded too: outputs list them)."""
        for key, query, doc in keyed:
            self.queries[query.query_id] = query.text
            self.docs[doc.doc_id] = doc
            self.pairs.add((key, query.query_id, doc.doc_id))

    def add_line(self, key: str, file_no: int, line_no: int, query: Query, doc: Doc) -> None:
        self.lines.append((self.export_id, file_no, line_no, key, query.query_id, doc.doc_id))
        self.keys.add(key)

    def write(self) -> None:
        """Texts and id pairs first, then the lines (an import needs both)."""
        if self.queries or self.docs:
            queries, docs = self.queries, self.docs
            self.store.put_text_rows(
                [(k, queries[k]) for k in sorted(queries)],
                [doc_row(docs[k]) for k in sorted(docs)],
            )
        if self.pairs:
            self.store.put_pairs(sorted(self.pairs))
        if self.lines or self.n_pairs:
            self.state.add_lines(self.export_id, self.lines, self.n_pairs)
        self._clear()


def _chunks(pairs: Iterable[tuple[Query, Doc]], size: int) -> Iterator[list[tuple[Query, Doc]]]:
    it = iter(pairs)
    while chunk := list(islice(it, size)):
        yield chunk


@contextlib.contextmanager
def _gc_frozen(freeze: bool) -> Iterator[None]:
    if not freeze:
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def export_requests(
    store: Store,
    judge: LLMBatchJudge,
    config: dict[str, Any],
    pairs: Iterable[tuple[Query, Doc]],
    out_dir: str | Path,
    *,
    max_requests: int = MAX_REQUESTS_PER_FILE,
    max_bytes: int = MAX_BYTES_PER_FILE,
    total: int | None = None,
    progress: Progress | None = None,
    chunk: int = CHUNK,
    batch_pairs: int = BATCH_PAIRS,
    freeze_gc: bool = False,
) -> ExportSummary:
    """Write request files for `pairs` into `out_dir` and record the export (see the module
    docstring); `config` is the judge's `job_config`, what import rebuilds the judge from.
    `freeze_gc` freezes what is alive now (modules, pairs already read) out of the cyclic
    garbage collector's reach for the export (~10% of its time at 100,000 pairs), as `grade`
    does; undone at the end."""
    if max_requests < 1 or max_bytes < 1:
        raise InputError("--batch-max-requests and --batch-max-bytes must be positive")
    folder = Path(out_dir)
    if not folder.parent.is_dir():
        raise InputError("--out-dir: its parent folder does not exist", path=folder)
    folder.mkdir(exist_ok=True)
    export_id = secrets.token_hex(6)
    fingerprint = judge.fingerprint()
    requests = RequestLines(judge)
    started = time.perf_counter()
    with _gc_frozen(freeze_gc), ExportState(store) as state:
        state.add_export(export_id, config, str(folder.resolve()))
        batch = _Batch(store, state, export_id)
        writer = RequestFiles(store, folder, export_id, max_requests, max_bytes, batch.write)
        summary = ExportSummary(export_id, writer.files)
        done = 0
        try:
            for part in _chunks(pairs, chunk):
                keys = ContentKeys(fingerprint)  # one per chunk: its text cache stays small
                keyed = [(keys.key(q.text, d.text), q, d) for q, d in part]
                statuses = store.statuses(k for k, _, _ in keyed)
                known = set(state.lines(export_id, (k for k, _, _ in keyed)))
                batch.add_texts(keyed)
                for key, query, doc in keyed:
                    if statuses.get(key) == "ok":
                        summary.stored += 1
                        continue
                    batch.n_pairs += 1
                    summary.pairs += 1
                    if key in known or key in batch.keys:
                        continue
                    file_no, line_no = writer.add(
                        requests.line(custom_id(export_id, key), query, doc)
                    )
                    # Known from now on even when a new file records and clears `batch.keys`.
                    known.add(key)
                    batch.add_line(key, file_no, line_no, query, doc)
                    summary.lines += 1
                if batch.size >= batch_pairs:
                    batch.write()
                done += len(part)
                if progress is not None:
                    progress(LineProgress(done, total, time.perf_counter() - started))
            writer.close()
            batch.write()
            writer.wait()
        except BaseException:
            writer.abandon()
            raise
        state.finish(export_id)
    return summary
