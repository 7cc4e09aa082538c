"""`relgrade batch import`: an engine's results files, every line validated as a live reply, in
ranges of whole lines read by worker processes (`import_work`). This process alone writes, deciding
the answers in file order as if read one by one: importing twice changes nothing, a killed import
loses nothing, and a line that is no valid reply is stored failed with the reason, never a grade."""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from grader.batch.adapter import BatchReplies, LLMBatchJudge
from grader.batch.files.export_files import LineProgress, Progress, frozen_gc
from grader.batch.files.exports import ExportState
from grader.batch.files.import_followup import (
    CloseSummary,
    ImportFollowUp,
    ImportSummary,
    jsonl_files,
    nothing_usable,
    refuse_request_files,
)
from grader.batch.files.import_work import (
    SHOW,
    RangeReader,
    RangeResult,
    RangeTask,
    line_ranges,
    read_in_worker,
    start_worker,
)
from grader.store.judgment_rows import StoredRow
from grader.store.store import Store

RANGE_BYTES = 4 << 20  # bytes of results lines per range (~2,300 lines of 1.8 KB)
BATCH_LINES = 50_000  # lines decided before they are written, in one transaction
BATCH_SECONDS = 3.0  # ... or after this long, so a crash loses little
PARALLEL_BYTES = 32 << 20  # smaller imports run in this process (starting workers takes ~1 s)
# Forked where the platform can: a spawned worker imports the modules again (~1 s of CPU each).
_START_METHOD = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
MAX_WORKERS = 4  # worker processes at most (the writing process is the limit past that)
COLLECT_WRITES = 8  # writes between two collections (with `freeze_gc`)
IN_FLIGHT = 8  # ranges sent ahead per worker, so workers keep reading while this process writes

JudgeFor = Callable[[dict[str, Any]], LLMBatchJudge]


class _Pending:
    """Answers decided, not yet written: rows by key, and outcomes by export and key with the
    line's place (file, line)."""

    def __init__(self) -> None:
        self.rows: dict[str, StoredRow] = {}
        self.outcomes: dict[str, dict[str, tuple[int, int, str]]] = {}
        self.lines = 0
        self.since = time.monotonic()

    def __bool__(self) -> bool:
        return bool(self.rows or self.outcomes)


Submit = Callable[[RangeTask], Callable[[], RangeResult]]  # a range -> the call that reads it


class Importer(ImportFollowUp):
    """Imports results files into a store (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        judge_for: JudgeFor,
        *,
        progress: Progress | None = None,
        workers: int | None = None,
        secrets: Sequence[str] = (),
        batch_lines: int = BATCH_LINES,
        range_bytes: int = RANGE_BYTES,
        freeze_gc: bool = False,
    ):
        self.store = store
        self.judge_for = judge_for
        self.progress = progress
        self.workers = workers
        self.secrets = tuple(secrets)
        self.batch_lines = batch_lines
        self.range_bytes = range_bytes
        self.freeze_gc = freeze_gc
        self.state = ExportState(store)
        self._judges: dict[str, LLMBatchJudge] = {}
        self._pending = _Pending()
        # key -> (the store's status, {export_id: its line's outcome}) this import wrote
        self._known: dict[str, tuple[str, dict[str, str]]] = {}
        self._written: deque[tuple[int, set[str]]] = deque()  # (ranges sent before, keys)
        self._sent = 0
        self._done = 0
        self._writes = 0
        self._summary = ImportSummary()  # the summary of the import `run` is doing

    def close(self) -> None:
        self.state.close()

    def __enter__(self) -> Importer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, paths: Sequence[str | Path]) -> ImportSummary:
        """Import every results file, then store failed the unanswered requests of the request
        files they touched (`missing`)."""
        files = jsonl_files(paths)
        refuse_request_files(files)
        empty = [p for p in files if p.stat().st_size <= 4096 and not p.read_bytes().strip()]
        total = sum(p.stat().st_size for p in files) or 1
        summary = self._summary = ImportSummary(files=len(files), empty=[str(p) for p in empty])
        started = time.perf_counter()
        workers = self.workers
        if workers is None:
            workers = min(os.cpu_count() or 1, MAX_WORKERS) if total >= PARALLEL_BYTES else 0
        with frozen_gc(self.freeze_gc, by_hand=True), contextlib.ExitStack() as stack:
            submit = self._reading(stack, workers)
            try:
                self._import(submit, files, IN_FLIGHT * workers + 1, started, total)
            finally:
                self._flush()  # what was decided before a stop is kept
        if not summary.lines:
            raise nothing_usable(files, summary)
        self._mark_missing(summary)
        return summary

    def _reading(self, stack: contextlib.ExitStack, workers: int) -> Submit:
        """How ranges are read: by `workers` processes (their pool entered on `stack`), or
        none: in this process."""
        if workers == 0:
            reader = RangeReader(self.store, self.state)
            return lambda t: lambda: reader.read(t)
        pool = stack.enter_context(
            ProcessPoolExecutor(
                workers,
                mp_context=multiprocessing.get_context(_START_METHOD),
                initializer=start_worker,
                initargs=(str(self.store.path), self.secrets),
            )
        )
        return lambda t: pool.submit(read_in_worker, t).result

    def _import(
        self, submit: Submit, files: list[Path], window: int, started: float, total: int
    ) -> None:
        readers: dict[str, BatchReplies] = {}
        tasks = (
            RangeTask(str(path), start, end, line, eof, readers)
            for path in files
            for start, end, line, eof in line_ranges(path, self.range_bytes)
        )
        flight: deque[tuple[RangeTask, Callable[[], RangeResult]]] = deque()
        done_bytes = 0
        while True:
            while len(flight) < window and (task := next(tasks, None)) is not None:
                flight.append((task, submit(task)))
                self._sent += 1
            if not flight:
                break
            task, result_of = flight.popleft()
            result = result_of()
            while result.need_export is not None:
                export_id, line = result.need_export
                readers[export_id] = self.judge(export_id, task.path, line).replies
                task = replace(task, readers=dict(readers))
                result = submit(task)()
            self._take(result)
            self._done += 1
            self._forget()
            done_bytes += task.end - task.start
            if (
                self._pending.lines >= self.batch_lines
                or time.monotonic() - self._pending.since >= BATCH_SECONDS
            ):
                self._flush()
                self._writes += 1
                if self.freeze_gc and self._writes % COLLECT_WRITES == 0:
                    gc.collect()  # what the lines written made (`frozen_gc`)
            if self.progress is not None:
                elapsed = time.perf_counter() - started
                fraction = min(1.0, done_bytes / total)
                self.progress(LineProgress(self._summary.lines, None, elapsed, fraction))

    def _take(self, result: RangeResult) -> None:
        """Decide each answer of a range, in file order, from what the worker read, unless this
        import wrote the key since (`_known`)."""
        summary = self._summary
        summary.truncated.extend(result.truncated)
        summary.n_malformed += result.n_malformed
        room = SHOW - len(summary.malformed)
        summary.malformed.extend(result.malformed[: max(0, room)])
        pending = self._pending
        known = self._known
        answers = result.answers
        summary.lines += len(answers)
        summary.touched.update({(a[1], a[2]) for a in answers})
        rows, outcomes = pending.rows, pending.outcomes
        for key, export_id, file_no, line_no, stored, outcome, status, error, row in answers:
            wrote = known.get(key)
            if wrote is not None:
                stored, outcome = wrote[0], wrote[1].get(export_id, outcome)
            if stored == "ok":
                summary.already += 1
                if status == "ok" and (outcome != "ok" or (wrote and export_id in wrote[1])):
                    summary.paid_twice += 1  # answered before by another line, not this one
                if outcome != "ok":
                    outcomes.setdefault(export_id, {})[key] = (file_no, line_no, "ok")
                    self._remember(key, "ok", export_id)
                continue
            if row is None or (status != "ok" and stored == "failed" and outcome == "failed"):
                summary.already += 1  # (row None: the worker found it ok, so it is)
                continue
            rows[key] = row
            status = status or "failed"
            outcomes.setdefault(export_id, {})[key] = (file_no, line_no, status)
            self._remember(key, status, export_id)
            if status == "ok":
                summary.ok += 1
            else:
                summary.failed += 1
                kind = error or "failed"
                summary.problems[kind] = summary.problems.get(kind, 0) + 1
        pending.lines += len(answers)

    def _remember(self, key: str, status: str, export_id: str) -> None:
        """What this import wrote for `key`: the store's status, and `export_id`'s outcome."""
        wrote = self._known.get(key)
        outcomes = wrote[1] if wrote is not None else {}
        outcomes[export_id] = status
        self._known[key] = (status, outcomes)

    def _flush(self) -> None:
        """Write the answers decided so far: judgments first, then outcomes (a crash between
        leaves outcomes to repair, never an answer lost)."""
        pending = self._pending
        if not pending:
            return
        if pending.rows:
            # (the export recorded each line's id pair already: `pairs=False`)
            ordered = [pending.rows[k] for k in sorted(pending.rows)]
            ok = [r for r in ordered if r.columns[3] == "ok"]
            failed = [r for r in ordered if r.columns[3] != "ok"]
            ok_written, failed_written = self.store.write_stored_parts([ok, failed], pairs=False)
            # a row not written: another process stored an ok answer meanwhile (final)
            summary = self._summary
            summary.ok -= len(ok) - ok_written
            summary.failed -= len(failed) - failed_written
            summary.already += len(ok) + len(failed) - ok_written - failed_written
        for export_id, outcomes in pending.outcomes.items():
            self.state.set_outcomes_at(export_id, sorted(outcomes.values()))
        keys = set(pending.rows)
        for outcomes in pending.outcomes.values():
            keys.update(outcomes)
        self._written.append((self._sent, keys))
        self._pending = _Pending()

    def _forget(self) -> None:
        """Drop from `_known` the writes every range in flight was sent after (they read them
        from the store)."""
        while self._written and self._written[0][0] <= self._done:
            _, keys = self._written.popleft()
            pending = self._pending
            keys -= pending.rows.keys()
            for outcomes in pending.outcomes.values():
                keys -= outcomes.keys()
            known = self._known
            for key in keys:
                known.pop(key, None)


def close_export(store: Store, judge_for: JudgeFor, export_id: str) -> CloseSummary:
    """`relgrade batch close` of `export_id` (`ImportFollowUp.close_export`)."""
    with Importer(store, judge_for) as importer:
        return importer.close_export(export_id)
