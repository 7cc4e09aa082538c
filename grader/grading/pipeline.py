"""The grading pipeline: store lookup, bounded concurrent judging, immediate storage.

A stored ok judgment is reused; the rest is judged by `concurrency` workers and each answer stored
within `flush_interval`, so a killed run loses only the calls in flight. `max_cost` reserves each
request's upper estimate; Ctrl-C lets calls in flight finish for `grace_s`. The run's state is
`grader.grading.run`.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Sequence
from operator import attrgetter, itemgetter
from typing import Any

from grader import defaults
from grader.grading.budget import Estimate, check_priced, estimate_requests
from grader.grading.events import ProgressCallback, ProgressEvent, StopButton
from grader.grading.leases import Leases
from grader.grading.pairs import Pair, pairs_to_grade
from grader.grading.report import GradingReport
from grader.grading.run import GradingRun
from grader.grading.units import PairState
from grader.judges.base import Judge
from grader.models import Doc, Query
from grader.store.claims import RENEW_S, ClaimBook
from grader.store.store import Store
from grader.store.writer import StoreWriter
from grader.store.writing import text_rows

__all__ = [
    "Estimate",
    "GradingReport",
    "ProgressCallback",
    "ProgressEvent",
    "StoreWriter",
    "grade_pairs",
    "pairs_to_grade",
    "run_grading",
]

FLUSH_INTERVAL_S = 0.1
GRACE_S = 15.0  # after Ctrl-C, how long calls in flight may take to finish


async def grade_pairs(
    pairs: Sequence[Pair],
    judges: Sequence[Judge],
    *,
    store: Store | None,
    writer: StoreWriter | None = None,
    verify_judge: Judge | None = None,
    concurrency: int = defaults.CONCURRENCY,
    max_cost: float | None = None,
    dry_run: bool = False,
    progress: ProgressCallback | None = None,
    handle_sigint: bool = False,
    freeze_gc: bool = False,
    secrets: Sequence[str] = (),
    flush_interval: float = FLUSH_INTERVAL_S,
    grace_s: float = GRACE_S,
    stream_final: bool = False,
    before_sending: Callable[[], None] | None = None,
    stop: StopButton | None = None,
) -> GradingReport:
    """Grade `pairs` with `judges` (several = an ensemble), reusing the store. `stream_final`
    leaves stored ok outputs in the store (`report.blocks()`); `before_sending` may raise to stop
    the run before its first request. Raises JudgeError when a judge dooms the run."""
    _check_arguments(judges, concurrency)
    writer = writer if writer is not None else StoreWriter(store)
    run = GradingRun(
        pairs,
        judges,
        store=store,
        writer=writer,
        verify_judge=verify_judge,
        max_cost=max_cost,
        secrets=secrets,
        dry_run=dry_run,
        stream_final=stream_final,
    )
    states = run.plan()
    if max_cost is not None:
        _check_priced(run)
    if dry_run:
        _fill_dry_run(run)
        return run.report
    if before_sending is not None and run.queue:
        before_sending()
    if store is not None:
        await _record_texts_and_pairs(store, pairs, states, run)
    workers = await _run_workers(
        run,
        writer,
        concurrency=concurrency,
        progress=progress,
        ctrl_c=_CtrlC(run, asyncio.get_running_loop(), grace_s),
        handle_sigint=handle_sigint,
        stop=stop,
        freeze_gc=freeze_gc,
        flush_interval=flush_interval,
    )
    return _finish(run, writer, workers)


async def _run_workers(
    run: GradingRun,
    writer: StoreWriter,
    *,
    concurrency: int,
    progress: ProgressCallback | None,
    ctrl_c: _CtrlC,
    handle_sigint: bool,
    stop: StopButton | None,
    freeze_gc: bool,
    flush_interval: float,
) -> list[asyncio.Task[None]]:
    """Judge the run's queue with `concurrency` workers, flushing answers and renewing leases
    meanwhile; then store what is left and let go of the leases. Returns the workers' tasks."""
    ctrl_c.install(handle_sigint=handle_sigint, stop=stop)
    flush_task = asyncio.create_task(_flusher(writer, flush_interval))
    renew_task = asyncio.create_task(_renewer(run))
    # The pairs, texts and modules alive now live for the whole run: freezing them keeps the
    # cyclic GC from walking them again and again while thousands of replies are parsed.
    # Undone when the run ends.
    if freeze_gc:
        gc.freeze()
    try:
        run.on_progress = progress
        if progress is not None:
            progress(run.progress())
        ctrl_c.workers = [asyncio.create_task(run.worker()) for _ in range(concurrency)]
        await asyncio.wait(ctrl_c.workers)
    finally:
        if freeze_gc:
            gc.unfreeze()
        for task in (flush_task, renew_task):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        ctrl_c.remove()
        try:
            await _flush(writer)
        finally:
            await _let_go(run)
    return ctrl_c.workers


async def _record_texts_and_pairs(
    store: Store, pairs: Sequence[Pair], states: Sequence[PairState], run: GradingRun
) -> None:
    """Keep the run's texts and every id pair of its keys in the store, off the event loop (a
    busy store makes these wait), and open the run's leases."""
    await asyncio.to_thread(store.put_text_rows, *text_rows(*distinct_texts(pairs)))
    # Every id pair, also those answered under another pair's ids (same texts).
    ids = [k for state in states for k in state.id_keys()] + run.unlisted
    await asyncio.to_thread(store.put_pairs, ids)
    run.claims = ClaimBook(store.path)
    run.leases = Leases(run.claims)


class _CtrlC:
    """Ctrl-C during a run (SIGINT with `handle_sigint`, or the `stop` button): the first press
    stops taking work and abandons the calls in flight after `grace_s`, a second at once."""

    def __init__(self, run: GradingRun, loop: asyncio.AbstractEventLoop, grace_s: float) -> None:
        self.run = run
        self.loop = loop
        self.grace_s = grace_s
        self.workers: list[asyncio.Task[None]] = []
        self.presses = 0
        self.stop: StopButton | None = None
        self.installed = False
        self.previous = signal.getsignal(signal.SIGINT)

    def abandon(self) -> None:
        for task in self.workers:
            task.cancel()

    def press(self) -> None:
        self.presses += 1
        self.run.report.interrupted = True
        self.run.stopping = True
        if self.presses > 1:
            self.abandon()
        else:
            self.loop.call_later(self.grace_s, self.abandon)

    def install(self, *, handle_sigint: bool, stop: StopButton | None) -> None:
        self.stop = stop
        if stop is not None:
            stop.attach(self.loop, self.press)
        if handle_sigint and threading.current_thread() is threading.main_thread():
            with contextlib.suppress(NotImplementedError, RuntimeError):
                self.loop.add_signal_handler(signal.SIGINT, self.press)
                self.installed = True

    def remove(self) -> None:
        if self.stop is not None:
            self.stop.detach()
        if self.installed:
            self.loop.remove_signal_handler(signal.SIGINT)
            if self.previous is not None:  # asyncio would leave Python's default otherwise
                signal.signal(signal.SIGINT, self.previous)


async def _flusher(writer: StoreWriter, interval: float) -> None:
    """Flush the writer every `interval` seconds, on a worker thread (a busy store waits there,
    not in the loop)."""
    while True:
        await asyncio.sleep(interval)
        await asyncio.to_thread(writer.flush)


async def _renewer(run: GradingRun) -> None:
    """Renew the run's leases every `RENEW_S` while it holds any."""
    while run.claims is not None:
        await asyncio.sleep(RENEW_S)
        try:
            await asyncio.to_thread(run.claims.renew)
        except sqlite3.OperationalError as exc:
            # Another process holds the write lock: try again next round. Dying here
            # would make the end of the run raise before its last flush.
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise


def _finish(
    run: GradingRun, writer: StoreWriter, workers: Sequence[asyncio.Task[None]]
) -> GradingReport:
    """The run's report once its workers ended and its answers are stored, or the error that
    ended it (a full disk, a judge's fatal error, a worker's)."""
    full = writer.full_error()
    if full is not None:  # the store's disk is full: the error says where the answers are
        raise full
    run.read_back()
    verify = [run.verify_judge] if run.verify_judge is not None else []
    _count_abandoned(run.report, [*run.judges, *verify])
    run.report.judgments = [j for j in run.outputs if j is not None]
    run.report.stored_outputs = run.stored_outputs()
    run.report.pending = len(run.pairs) - run.report.done()
    if run.fatal is not None:
        raise run.fatal
    # A worker that died of an error outside the judge call (the store, a bug) left its pairs
    # unfinished: raise it rather than return a report that looks done with pairs missing.
    errors = [task.exception() for task in workers if not task.cancelled()]
    for error in errors:  # each retrieved, so none is logged as never retrieved
        if error is not None:
            raise error
    return run.report


async def _let_go(run: GradingRun) -> None:
    """Release the leases the run still holds (answers stored released theirs), once its last
    round of claims has ended."""
    try:
        if run.leases is not None:
            await run.leases.settle()
    finally:
        if run.claims is not None:
            run.claims.release_all()
            run.claims.close()


def _count_abandoned(report: GradingReport, judges: list[Judge]) -> None:
    """Add to the report the tokens and cost of answered attempts of pairs cut short (Ctrl-C):
    paid for, though no judgment holds them (a judge that tracks them has `take_abandoned`)."""
    for judge in {id(j): j for j in judges}.values():
        take = getattr(judge, "take_abandoned", None)
        if take is None:
            continue
        usage, cost = take()
        if usage.prompt_tokens or usage.completion_tokens:
            report.usage = report.usage + usage
            report.cost += cost or 0.0
            report.unpriced += cost is None


async def _flush(writer: StoreWriter) -> None:
    """The run's last flush, off the event loop; if this task is cancelled meanwhile, finish it
    here (a paid answer is never dropped)."""
    try:
        await asyncio.to_thread(writer.flush)
    except asyncio.CancelledError:
        writer.flush()
        raise


def _check_arguments(judges: Sequence[Judge], concurrency: int) -> None:
    if not judges:
        raise ValueError("at least one judge is needed")
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")


def distinct_texts(pairs: Sequence[Pair]) -> tuple[list[Query], list[Doc]]:
    """Each query and document of `pairs` once (by id; in C, not a Python step per pair)."""
    queries = list(map(itemgetter(0), pairs))
    docs = list(map(itemgetter(1), pairs))
    by_qid = dict(zip(map(attrgetter("query_id"), queries), queries, strict=True))
    by_did = dict(zip(map(attrgetter("doc_id"), docs), docs, strict=True))
    return list(by_qid.values()), list(by_did.values())


def _check_priced(run: GradingRun) -> None:
    """--max-cost can only be kept when every judge that will be asked has a price."""
    requests = [(unit.judge, unit.state.pair) for unit in run.queue]
    check_priced(requests, run.verify_judge, run.pairs)


def _fill_dry_run(run: GradingRun) -> None:
    report = run.report
    units = run.pending_units()
    report.estimate = estimate_requests(((u.judge, u.state.pair) for u in units), run.store)
    for unit in units:
        pair = unit.state.pair
        report.to_send.append((pair.query.query_id, pair.doc.doc_id, unit.judge.judge_id))
    sent = {unit.state.index for unit in units}
    followers = {u.state.index for group in run.followers.values() for u in group}
    report.shared = len(followers - sent)
    report.judgments = [j for j in run.outputs if j is not None]
    report.stored_outputs = run.stored_outputs()
    report.pending = len(run.pairs) - report.done()


def run_grading(
    pairs: Sequence[Pair],
    judges: Sequence[Judge],
    **options: Any,
) -> GradingReport:
    """`grade_pairs` from synchronous code (the CLI); same arguments."""
    return run_report(lambda: grade_pairs(pairs, judges, **options))


def run_report(make: Callable[[], Awaitable[GradingReport]]) -> GradingReport:
    """Run the coroutine `make()` gives in a new event loop and return its report."""
    reports: list[GradingReport] = []

    async def main() -> None:
        # The report is handed over outside the task's result: on Python 3.11 `asyncio.run`
        # ends with `signal.getsignal(SIGINT)`, which formats the main task's repr (and so its
        # result, every judgment of the run) when another handler is set.
        reports.append(await make())

    asyncio.run(main())
    return reports[0]
