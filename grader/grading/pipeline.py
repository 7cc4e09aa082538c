"""The grading pipeline: store lookup, `concurrency` workers, each answer stored within
`FLUSH_INTERVAL_S` (a killed run loses only the calls in flight); `max_cost` reserves each request's
upper estimate; Ctrl-C lets calls in flight finish for `grace_s`. State: `grader.grading.run`."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import sqlite3
import threading
from collections.abc import Awaitable, Callable, Sequence
from operator import attrgetter, itemgetter

from grader import defaults
from grader.grading.budget import check_priced, estimate_requests
from grader.grading.events import ProgressCallback, StopButton
from grader.grading.leases import Leases
from grader.grading.pairs import Pair, PairState
from grader.grading.report import GradingReport, read_back
from grader.grading.run import GradingRun
from grader.judges.base import Judge
from grader.store.claims import RENEW_S, ClaimBook
from grader.store.store import Store
from grader.store.writer import StoreWriter
from grader.store.writing import text_rows

__all__ = ["GradingReport", "StoreWriter", "grade_pairs", "run_report"]

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
    grace_s: float = GRACE_S,
    stream_final: bool = False,
    before_sending: Callable[[], None] | None = None,
    stop: StopButton | None = None,
) -> GradingReport:
    """Grade `pairs` with `judges` (several = an ensemble), reusing the store. `stream_final`
    leaves stored ok outputs in the store (`report.blocks()`); `before_sending` may raise to stop
    the run before its first request. Raises JudgeError when a judge dooms the run."""
    if not judges:
        raise ValueError("at least one judge is needed")
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
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
    if max_cost is not None:  # it can only be kept when every judge asked has a price
        check_priced([(u.judge, u.state.pair) for u in run.queue], verify_judge, pairs)
    if dry_run:
        _fill_dry_run(run)
        return run.report
    if before_sending is not None and run.queue:
        before_sending()
    if store is not None:
        await _record_texts_and_pairs(store, pairs, states, run)
    run.on_progress = progress
    ctrl_c = _CtrlC(run, grace_s, handle_sigint=handle_sigint, stop=stop)
    workers = await _run_workers(run, writer, ctrl_c, concurrency, freeze_gc)
    return _finish(run, writer, workers)


async def _run_workers(
    run: GradingRun,
    writer: StoreWriter,
    ctrl_c: _CtrlC,
    concurrency: int,
    freeze_gc: bool,
) -> list[asyncio.Task[None]]:
    """Judge the queue with `concurrency` workers, flushing answers and renewing leases."""
    ctrl_c.install()
    flush_task = asyncio.create_task(_flusher(writer, FLUSH_INTERVAL_S))
    renew_task = asyncio.create_task(_renewer(run))
    # What is alive now lives for the whole run: frozen, the cyclic GC stops walking it again
    # and again while thousands of replies are parsed.
    if freeze_gc:
        gc.freeze()
    try:
        if run.on_progress is not None:
            run.on_progress(run.progress())
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
    """Store the run's texts and id pairs off the event loop; open its leases."""
    # Each query and document once, by id (in C, not a Python step per pair).
    queries = list(map(itemgetter(0), pairs))
    docs = list(map(itemgetter(1), pairs))
    by_qid = dict(zip(map(attrgetter("query_id"), queries), queries, strict=True))
    by_did = dict(zip(map(attrgetter("doc_id"), docs), docs, strict=True))
    await asyncio.to_thread(store.put_text_rows, *text_rows(by_qid.values(), by_did.values()))
    # Every id pair, also those answered under another pair's ids (same texts).
    ids = [k for state in states for k in state.id_keys()] + run.unlisted
    await asyncio.to_thread(store.put_pairs, ids)
    run.claims = ClaimBook(store.path)
    run.leases = Leases(run.claims)


class _CtrlC:
    """Ctrl-C (SIGINT or the `stop` button): stop taking work, abandon calls after `grace_s`."""

    def __init__(
        self, run: GradingRun, grace_s: float, *, handle_sigint: bool, stop: StopButton | None
    ) -> None:
        self.run = run
        self.loop = asyncio.get_running_loop()
        self.grace_s = grace_s
        self.handle_sigint = handle_sigint
        self.stop = stop
        self.workers: list[asyncio.Task[None]] = []
        self.presses = 0
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

    def install(self) -> None:
        if self.stop is not None:
            self.stop.attach(self.loop, self.press)
        if self.handle_sigint and threading.current_thread() is threading.main_thread():
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
    """Flush the writer every `interval` seconds on a worker thread (a busy store waits there)."""
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
            # Another process holds the write lock: try next round (not die before the last flush).
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise


def _finish(
    run: GradingRun, writer: StoreWriter, workers: Sequence[asyncio.Task[None]]
) -> GradingReport:
    """The run's report once its workers ended, or the error that ended it."""
    full = writer.full_error()
    if full is not None:  # the store's disk is full: the error says where the answers are
        raise full
    if run.store is not None:  # another process's first answer is final
        read_back(run.store, run.pairs, run.outputs, run.final_from_store, run.report)
    _count_abandoned(run.report, [*run.judges, run.verify_judge])
    run.close_report()
    if run.fatal is not None:
        raise run.fatal
    # A worker that died outside the judge call left pairs unfinished: raise, not a report.
    errors = [task.exception() for task in workers if not task.cancelled()]
    for error in errors:  # each retrieved, so none is logged as never retrieved
        if error is not None:
            raise error
    return run.report


async def _let_go(run: GradingRun) -> None:
    """Release the leases the run still holds, once its last round of claims has ended."""
    try:
        if run.leases is not None:
            await run.leases.settle()
    finally:
        if run.claims is not None:
            run.claims.release_all()
            run.claims.close()


def _count_abandoned(report: GradingReport, judges: Sequence[Judge | None]) -> None:
    """Add the tokens and cost of attempts paid for but cut short (`take_abandoned`)."""
    for judge in {id(j): j for j in judges}.values():
        take = getattr(judge, "take_abandoned", None)
        if take is not None:
            report.pay(*take())


async def _flush(writer: StoreWriter) -> None:
    """The run's last flush, off the loop; finished here if cancelled (a paid answer is kept)."""
    try:
        await asyncio.to_thread(writer.flush)
    except asyncio.CancelledError:
        writer.flush()
        raise


def _fill_dry_run(run: GradingRun) -> None:
    report = run.report
    units = list(run.queue)
    report.estimate = estimate_requests(((u.judge, u.state.pair) for u in units), run.store)
    for unit in units:
        pair = unit.state.pair
        report.to_send.append((pair.query.query_id, pair.doc.doc_id, unit.judge.judge_id))
    sent = {unit.state.index for unit in units}
    followers = {u.state.index for group in run.followers.values() for u in group}
    report.shared = len(followers - sent)
    run.close_report()


def run_report(make: Callable[[], Awaitable[GradingReport]]) -> GradingReport:
    """Run the coroutine `make()` gives in a new event loop and return its report."""
    reports: list[GradingReport] = []

    async def main() -> None:
        # Not the task's result: Python 3.11's `asyncio.run` may format the main task's repr,
        # and so every judgment of the run, at its end.
        reports.append(await make())

    asyncio.run(main())
    return reports[0]
