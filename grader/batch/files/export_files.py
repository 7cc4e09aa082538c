"""`relgrade batch export`: request files in the OpenAI batch format for any engine, recorded in
the store (`custom_id` is `relgrade:EXPORT_ID:KEY`), streamed in chunks. A line is recorded only in
the transaction that publishes its file: a killed export leaves no request waiting in a file no
engine sees."""

from __future__ import annotations

import contextlib
import gc
import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from operator import itemgetter
from pathlib import Path
from typing import Any

from grader.batch.adapter import LLMBatchJudge
from grader.batch.files.exports import ExportState, LineRow, batches, custom_id
from grader.batch.files.request_files import (
    RequestFiles,
    RequestLines,
    drop_stale,
    remove_temporaries,
)
from grader.batch.requests import MAX_BYTES_PER_FILE, MAX_REQUESTS_PER_FILE
from grader.errors import DiskFullError, InputError
from grader.keys import ContentKeys
from grader.models import Doc, Query
from grader.output_modes import OutputMode
from grader.store.busy import file_system, is_full
from grader.store.store import Checkpoints, Store, checkpoints_beside
from grader.store.writing import DocRow, doc_row

CHUNK = 2000  # pairs per store lookup
BATCH_PAIRS = 50_000  # id pairs whose texts, id pairs and lines are written in one transaction each
CACHE_KIB = 32_768  # SQLite pages each of the export's connections keeps (2 MiB by default)


def check_batch_mode(mode: OutputMode) -> None:
    """InputError when batch engines would drop (not refuse) `mode`'s constraint."""
    why = {
        "vllm_guided_json": (
            "vLLM removed the guided_json request field (0.12): its run-batch takes the line, logs "
            'that the field is removed ("output will NOT be constrained") and answers without '
            "the schema; a batch has no refusal to fall back on"
        ),
        "ollama_format": (
            "`format` is a field of Ollama's native /api/chat; a batch line goes to "
            "/v1/chat/completions, where vLLM and Ollama ignore it, so the replies would not be "
            "constrained"
        ),
    }.get(mode)
    if why is not None:
        raise InputError(
            f"--output-mode {mode} cannot be exported for a batch engine: {why}",
            hint="use --output-mode json_schema (response_format json_schema, which vLLM, "
            "SGLang, llama.cpp and Ollama's OpenAI endpoint honour) or vllm_structured_outputs "
            "(vLLM >= 0.10.2)",
        )


@contextlib.contextmanager
def frozen_gc(on: bool = True, *, by_hand: bool = False) -> Iterator[None]:
    """Unless not `on`: what is alive on entry is left out of every collection inside
    (`gc.freeze`, for ~100 short-lived objects a line); `by_hand`: automatic collections off
    too, the work calling `gc.collect()` after a block of lines."""
    was_on = gc.isenabled()
    if on:
        if by_hand:
            gc.disable()
        gc.freeze()
    try:
        yield
    finally:
        if on:
            gc.unfreeze()
        if was_on:
            gc.enable()


@dataclass(frozen=True)
class LineProgress:
    """How far an export, import or run is: `lines` done of `total` (None: unknown) after
    `elapsed` seconds; `fraction` done when known another way (bytes read)."""

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
    """What an export wrote: request files, lines (one per content key) and the id pairs they
    cover; pairs left out as stored ok already, or as waiting in another export (`pending`)."""

    export_id: str
    files: list[Path]
    lines: int = 0
    pairs: int = 0
    stored: int = 0
    pending: int = 0
    waiting: list[str] = field(default_factory=list)  # other exports not imported yet
    waiting_in: dict[str, int] = field(default_factory=dict)  # left out, by export
    stale: int = 0  # temporary files a killed export left, removed


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
    include_pending: bool = False,
) -> ExportSummary:
    """Write request files for `pairs` into `out_dir` and record the export; `config` is the
    judge's `job_config`, what import rebuilds the judge from. A pair waiting in another export
    is left out unless `include_pending`. `freeze_gc`: see `frozen_gc`. Stopped halfway, the
    files written whole are published with their lines and the rest removed."""
    if max_requests < 1 or max_bytes < 1:
        raise InputError("--batch-max-requests and --batch-max-bytes must be positive")
    folder = _out_folder(Path(out_dir))
    export_id = secrets.token_hex(6)
    started = time.perf_counter()
    with (
        frozen_gc(freeze_gc),
        ExportState(store) as state,
        checkpoints_beside(store.path, [store, state]) as checkpoints,
    ):
        store.set_cache(CACHE_KIB)  # the key indexes' pages, rewritten at each transaction
        state.set_cache(CACHE_KIB)
        state.add_export(export_id, config, str(folder.resolve()))
        summary = ExportSummary(export_id, [])
        summary.waiting = [] if include_pending else state.exports_waiting(export_id)
        files = RequestFiles(folder, export_id, max_requests, max_bytes)
        summary.stale = drop_stale(folder, state.unlisted)  # what a killed export left
        export = _Export(store, state, judge, files, batch_pairs, checkpoints)
        try:
            for part in batches(pairs, chunk):
                export.add(part, summary)
                if progress is not None:
                    done = summary.pairs + summary.stored + summary.pending
                    progress(LineProgress(done, total, time.perf_counter() - started))
            files.close()
            export.record()
        except BaseException as exc:
            export.stop(exc)
            raise
        summary.files = export.published
        state.finish(export_id)
    return summary


def _out_folder(folder: Path) -> Path:
    """`folder`, made when its parent exists (InputError otherwise)."""
    if not folder.parent.is_dir():
        raise InputError("--out-dir: its parent folder does not exist", path=folder)
    try:
        folder.mkdir(exist_ok=True)
    except OSError as exc:
        raise InputError(f"--out-dir: cannot create it ({exc.strerror})", path=folder) from None
    return folder


class _Export:
    """One export being written: its request files, and its rows not recorded yet."""

    def __init__(
        self,
        store: Store,
        state: ExportState,
        judge: LLMBatchJudge,
        files: RequestFiles,
        batch_pairs: int,
        checkpoints: Checkpoints,
    ) -> None:
        self.store = store
        self.checkpoints = checkpoints
        self.state = state
        self.export_id = files.export_id
        self.fingerprint = judge.fingerprint()
        self.requests = RequestLines(judge)
        self._lines: list[LineRow] = []  # lines not recorded yet: their file is not published
        self._keys: dict[str, int] = {}  # the keys of `_lines`, with their file
        self._file_pairs: dict[int, int] = {}  # id pairs of `_lines`' keys, by file
        self._held_pairs = 0  # id pairs of keys whose line is recorded already
        self.files = files
        self.batch_pairs = batch_pairs
        self.published: list[Path] = []
        self.dropped = ""  # how `discard` left the store
        self._clear()

    def _clear(self) -> None:
        self._queries: dict[str, str] = {}
        self._docs: dict[str, DocRow] = {}
        self._pairs: set[tuple[str, str, str]] = set()

    def add(self, part: list[tuple[Query, Doc]], summary: ExportSummary) -> None:
        """Write the new lines of a chunk of pairs; record them once there is enough, or a
        file to publish."""
        keys = ContentKeys(self.fingerprint)  # one per chunk: its text cache stays small
        keyed = [(keys.key(q.text, d.text), q, d) for q, d in part]
        statuses = self.store.statuses(k for k, _, _ in keyed)
        asked = [k for k, _, _ in keyed if statuses.get(k) != "ok"]
        waiting = self.state.keys_waiting(summary.waiting, asked) if summary.waiting else {}
        held = self.state.lines(self.export_id, (k for k in asked if k not in self._keys))
        # The texts and id pairs of every pair (those already graded too: outputs list them).
        self._queries.update((q.query_id, q.text) for _, q, _ in keyed)
        self._docs.update((d.doc_id, doc_row(d)) for _, _, d in keyed)
        self._pairs.update((k, q.query_id, d.doc_id) for k, q, d in keyed)
        export_id, lines, new = self.export_id, self._lines, self._keys
        for key, query, doc in keyed:
            if statuses.get(key) == "ok":
                summary.stored += 1
                continue
            if key in waiting:  # left out: waiting in another export
                summary.pending += 1
                summary.waiting_in[waiting[key]] = summary.waiting_in.get(waiting[key], 0) + 1
                continue
            summary.pairs += 1
            if key in held:
                self._held_pairs += 1
                continue
            file_no = new.get(key)
            if file_no is None:
                line = self.requests.line(custom_id(export_id, key), query, doc)
                file_no, line_no = self.files.add(line)
                lines.append((export_id, file_no, line_no, key, query.query_id, doc.doc_id))
                new[key] = file_no
                summary.lines += 1
            self._file_pairs[file_no] = self._file_pairs.get(file_no, 0) + 1
        if self.files.written or len(self._pairs) >= self.batch_pairs:
            self.record()

    def record(self) -> None:
        """Write the texts and id pairs not recorded yet; then publish each file written
        whole, its lines recorded in the transaction that lists it."""
        if self._queries or self._docs:
            queries, docs = self._queries, self._docs
            self.store.put_text_rows(
                [(k, queries[k]) for k in sorted(queries)], [docs[k] for k in sorted(docs)]
            )
        if self._pairs:
            self.store.put_pairs(sorted(self._pairs))
        self._clear()
        for written in self.files.take_written():
            where = str(written.final.resolve())
            file = (written.file_no, where, written.lines, written.size, written.sha256())
            rows = self._take_lines(written.file_no)
            pairs = self._file_pairs.pop(written.file_no, 0) + self._held_pairs
            try:
                self.state.add_lines(self.export_id, rows, pairs, file, written.publish)
            finally:
                written.release()
            self._held_pairs = 0
            self.published.append(written.final)
        if self._held_pairs and not self._lines:  # (no file to count them with)
            self.state.add_lines(self.export_id, [], self._held_pairs)
            self._held_pairs = 0
        self.checkpoints.due()  # after the publishing: its commits do not wait on the disk

    def _take_lines(self, file_no: int) -> list[LineRow]:
        """The lines of file `file_no`, forgotten here, in key order (the index's)."""
        rows = [row for row in self._lines if row[1] == file_no]
        self._lines = [row for row in self._lines if row[1] != file_no]
        for row in rows:
            del self._keys[row[3]]
        rows.sort(key=itemgetter(3))  # by key
        return rows

    def stop(self, exc: BaseException) -> None:
        """Stop on `exc`: `abandon`, or on a full disk `discard` and raise a DiskFullError."""
        folder = self.files.out_dir
        if not is_full(exc, folder):
            self.abandon()
            return
        self.discard()
        raise DiskFullError(
            f"{folder}: no room left on {file_system(folder)} while writing export "
            f"{self.export_id}: its request files are removed and it is not listed "
            f"{self.dropped}; free space there and run the same command again"
        ) from None

    def abandon(self) -> None:
        """Stop: the files written whole are published with their lines, when the store
        takes them; every other file of the export is removed."""
        self.files.abandon()
        with contextlib.suppress(Exception):  # (the store failed: they are removed below)
            self.record()
        remove_temporaries(self.files.out_dir, self.export_id)

    def discard(self) -> None:
        """Stop on a full disk: every file of the export is removed, and the store forgets it
        when its own disk lets it (`dropped` says)."""
        self.files.abandon()
        remove_temporaries(self.files.out_dir, self.export_id)
        for written in self.files.take_written():
            written.final.unlink(missing_ok=True)
        for path in self.published:
            path.unlink(missing_ok=True)
        try:
            self.state.drop(self.export_id)
        except Exception:  # the store's disk is full too: it stays listed, unfinished
            self.dropped = "(but the store, on a full disk too, still lists it as unfinished)"
        else:
            self.dropped = "in the store"
