"""`relgrade batch export`: request files in the OpenAI batch format for any inference engine
(vLLM run-batch, Ray Data, ...), recorded in the store so any process can import the results.

Each line is `{"custom_id", "method", "url", "body"}`; the body is exactly what live grading
sends for the pair (the judge's `build_request`: same prompt rendering, schema and sampling;
made byte for byte by `grader.batch.files.request_lines` without a dict per line) and `custom_id` is
`relgrade:EXPORT_ID:KEY` (`grader.batch.files.exports`). Pairs whose key is already ok in the store
are not exported; pairs sharing a key (same texts) are one line, and every id pair is listed
under its key in the store, so outputs cover them all. Files are split under a line
and a byte limit (`grader.batch.requests.split_requests`'s limits), written to a temporary name
and renamed once complete, on a thread (`grader.batch.files.request_files`); each one's lines, bytes
and sha256 are recorded.

The work streams in chunks: memory does not grow with the number of lines (the pairs given may
be a generator); which keys the export already holds is asked of the store, not kept in memory
(but for the few chunks handed over and not yet recorded). This process renders each chunk's
new lines and writes them to the request files; it hands the chunk, as plain rows, and the
files written whole since the last one to the recorder (`grader.batch.files.export_recorder`), which
records texts, id pairs and lines, then publishes the files, in that order; a large export
runs the recorder in a child process (`grader.batch.files.export_process`), on the machine's other
core.
"""

from __future__ import annotations

import contextlib
import gc
import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from grader.batch.adapter import LLMBatchJudge
from grader.batch.files import export_process
from grader.batch.files.export_recorder import Chunk, ExportRecorder
from grader.batch.files.exports import ExportState, custom_id
from grader.batch.files.request_files import RequestFiles, remove_temporaries
from grader.batch.files.request_lines import RequestLines
from grader.batch.requests import MAX_BYTES_PER_FILE, MAX_REQUESTS_PER_FILE
from grader.errors import InputError
from grader.keys import ContentKeys
from grader.models import Doc, Query
from grader.store.store import Store, doc_row
from grader.store.wal import BULK_PAGES

CHUNK = 2000  # pairs per store lookup
BATCH_PAIRS = 50_000  # id pairs whose texts, id pairs and lines are written in one transaction each
# (random keys: each transaction rewrites most pages of the key indexes, so fewer pay)
BACKGROUND_FROM = 50_000  # pairs from which the recording runs in a child process


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
    pairs they cover; pairs left out because the store already holds their answer, and those
    left out because another export's request for them waits for its results (`waiting`, by
    export; unless `include_pending`)."""

    export_id: str
    files: list[Path]
    lines: int = 0
    pairs: int = 0
    stored: int = 0
    pending: int = 0
    waiting: list[str] = field(default_factory=list)  # other exports not imported yet
    waiting_in: dict[str, int] = field(default_factory=dict)  # left out, by export

    def left_out(self, export_id: str) -> None:
        """Count a pair left out because its request waits in `export_id`."""
        self.pending += 1
        self.waiting_in[export_id] = self.waiting_in.get(export_id, 0) + 1


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
    background: bool | None = None,
    include_pending: bool = False,
) -> ExportSummary:
    """Write request files for `pairs` into `out_dir` and record the export (see the module
    docstring); `config` is the judge's `job_config`, what import rebuilds the judge from.
    `freeze_gc` freezes what is alive now (modules, pairs already read) out of the cyclic
    garbage collector's reach for the export (~10% of its time at 100,000 pairs), as `grade`
    does; undone at the end. `background` records in a child process
    (`grader.batch.files.export_process`; None: when the platform forks and `total` is unknown or
    at least `BACKGROUND_FROM`). A pair whose request waits in another export not imported yet
    is left out (an engine run on both would be paid twice), unless `include_pending`."""
    if max_requests < 1 or max_bytes < 1:
        raise InputError("--batch-max-requests and --batch-max-bytes must be positive")
    folder = Path(out_dir)
    if not folder.parent.is_dir():
        raise InputError("--out-dir: its parent folder does not exist", path=folder)
    folder.mkdir(exist_ok=True)
    if background is None:
        background = export_process.available() and (total is None or total >= BACKGROUND_FROM)
    export_id = secrets.token_hex(6)
    fingerprint = judge.fingerprint()
    requests = RequestLines(judge)
    started = time.perf_counter()
    with (
        _gc_frozen(freeze_gc),
        ExportState(store) as state,
        store.checkpoint_every(BULK_PAGES),  # (an export recording in this process)
        state.checkpoint_every(BULK_PAGES),
    ):
        state.add_export(export_id, config, str(folder.resolve()))
        summary = ExportSummary(export_id, [])
        summary.waiting = [] if include_pending else state.exports_waiting(export_id)
        recorder: ExportRecorder | export_process.BackgroundRecorder
        if background:
            recorder = export_process.BackgroundRecorder(store, folder, export_id, batch_pairs)
        else:
            recorder = ExportRecorder(store, state, folder, export_id, batch_pairs)
        files = RequestFiles(folder, export_id, max_requests, max_bytes)
        pending = _Pending()
        handed = _KeyFilter()
        done = seq = given = 0  # given: lines placed in files whose rows the recorder has
        try:
            for seq, part in enumerate(_chunks(pairs, chunk), start=1):
                keys = ContentKeys(fingerprint)  # one per chunk: its text cache stays small
                keyed = [(keys.key(q.text, d.text), q, d) for q, d in part]
                statuses = store.statuses(k for k, _, _ in keyed)
                waiting = _waiting(state, summary.waiting, keyed, statuses)
                asked = [k for k, _, _ in keyed if k in handed]
                known = set(state.lines(export_id, asked)) if asked else set()
                work = _chunk_rows(seq, keyed)
                for key, query, doc in keyed:
                    if statuses.get(key) == "ok":
                        summary.stored += 1
                        continue
                    if key in waiting:
                        summary.left_out(waiting[key])
                        continue
                    work.n_pairs += 1
                    if key in known or key in pending:
                        continue
                    file_no, line_no = files.add(
                        requests.line(custom_id(export_id, key), query, doc)
                    )
                    work.lines.append(
                        (export_id, file_no, line_no, key, query.query_id, doc.doc_id)
                    )
                    pending.add(key, seq)
                    handed.add(key)
                work.files = files.take_written()
                recorder.add(work)
                given = files.placed
                pending.recorded(recorder.recorded)
                summary.pairs += work.n_pairs
                summary.lines += len(work.lines)
                done += len(part)
                if progress is not None:
                    progress(LineProgress(done, total, time.perf_counter() - started))
            files.close()
            files.wait()
            recorder.add(Chunk(seq + 1, files=files.take_written()))
            summary.files.extend(recorder.finish())
        except BaseException:
            _abandon(files, recorder, given, seq + 1)
            raise
        state.finish(export_id)
    return summary


def _waiting(
    state: ExportState,
    exports: list[str],
    keyed: list[tuple[str, Query, Doc]],
    statuses: dict[str, str],
) -> dict[str, str]:
    """The keys of a chunk not stored ok whose request waits in one of `exports` (with it)."""
    if not exports:
        return {}
    return state.keys_waiting(exports, (k for k, _, _ in keyed if statuses.get(k) != "ok"))


def _abandon(
    files: RequestFiles,
    recorder: ExportRecorder | export_process.BackgroundRecorder,
    handed: int,
    seq: int,
) -> None:
    """Stop an export: the files written whole whose lines the recorder has are published
    (as files are in a finished export), then every other file of the export is removed, once
    nothing writes them (the recording child's end included)."""
    finished = files.abandon(handed)
    if finished:
        with contextlib.suppress(Exception):  # the recorder failed: they are removed below
            recorder.add(Chunk(seq, files=finished))
    recorder.abandon()
    remove_temporaries(files.out_dir, files.export_id)


def _chunk_rows(seq: int, keyed: list[tuple[str, Query, Doc]]) -> Chunk:
    """A chunk's texts and id pairs as rows (those already graded too: outputs list them)."""
    queries = {q.query_id: q.text for _, q, _ in keyed}
    docs = {d.doc_id: d for _, _, d in keyed}
    return Chunk(
        seq,
        queries=list(queries.items()),
        docs=[doc_row(d) for d in docs.values()],
        pairs=[(k, q.query_id, d.doc_id) for k, q, d in keyed],
    )


class _KeyFilter:
    """The keys of lines this export handed over, told apart in a fixed 2 MiB bitmap by the
    first 24 bits of their digest: a key not `in` it was never handed over, so the store
    need not be asked about it (a key `in` it may have been). Memory does not grow with the
    export; at 1,000,000 lines ~6% of new keys are asked."""

    def __init__(self) -> None:
        self._bits = bytearray(1 << 21)

    def __contains__(self, key: str) -> bool:
        i = int(key[7:13], 16)  # "sha256:" and 6 hex digits
        return bool(self._bits[i >> 3] & (1 << (i & 7)))

    def add(self, key: str) -> None:
        i = int(key[7:13], 16)
        self._bits[i >> 3] |= 1 << (i & 7)


class _Pending:
    """Keys of lines handed to the recorder whose rows it has not recorded yet, by chunk: with
    the store's, the keys the export holds (a text repeated later is one line)."""

    def __init__(self) -> None:
        self._keys: dict[str, int] = {}
        self._by_chunk: dict[int, list[str]] = {}

    def __contains__(self, key: str) -> bool:
        return key in self._keys

    def add(self, key: str, seq: int) -> None:
        self._keys[key] = seq
        self._by_chunk.setdefault(seq, []).append(key)

    def recorded(self, seq: int) -> None:
        """Forget the keys of chunks up to `seq`: the store has them now."""
        for done in [s for s in self._by_chunk if s <= seq]:
            for key in self._by_chunk.pop(done):
                del self._keys[key]
