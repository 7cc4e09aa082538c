"""A busy store never loses a paid answer (issue 11, section 2).

Another connection holds the store's write lock (BEGIN IMMEDIATE) mid-run, before the start, or
while a migration is pending: `relgrade grade` (a real subprocess against the fake server) waits,
says so on stderr, and finishes with every answer stored and each pair requested once. Answers
held past the journal threshold go to the journal beside the store, which a killed process leaves
behind and the next open replays. Thresholds are shortened through the environment."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.errors import StoreError
from grader.grading.pairs import Pair
from grader.grading.pipeline import grade_pairs
from grader.io.judgments import read_judgments
from grader.job.summary import busy_text
from grader.judges.llm.judge import LLMJudge
from grader.models import Doc, Query
from grader.prompts import load_prompt
from grader.store import migrations as store_migrations
from grader.store.busy import StoreBusyEvent, seconds_from_env
from grader.store.store import Store
from grader.store.writer import StoreWriter
from tests.fakeserver import FakeServer
from tests.grade_data import GradeFiles, write_grade_files
from tests.helpers.journals import journal_path
from tests.helpers.judgments import FP, call_record, ok, stored_judgments
from tests.helpers.store_lock import LockHolder

ROOT = Path(__file__).resolve().parents[1]
BUSY_ENV = {"RELGRADE_STORE_BUSY_TIMEOUT": "0.2s", "RELGRADE_STORE_BUSY_JOURNAL_AFTER": "1s"}


def stored(store: Path) -> int:
    conn = sqlite3.connect(store, timeout=30)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM judgments WHERE status = 'ok'").fetchone()[0])
    except sqlite3.OperationalError:  # not migrated yet
        return 0
    finally:
        conn.close()


def start(files: GradeFiles, server: FakeServer, store: Path, out: Path) -> subprocess.Popen[str]:
    env = {**os.environ, **BUSY_ENV, "OPENAI_API_KEY": "sk-test-busy", "PYTHONPATH": str(ROOT)}
    env.pop("OPENAI_BASE_URL", None)
    args = files.args(
        "--base-url", server.base_url, "--store", store, "--concurrency", "4", "--out", out
    )
    return subprocess.Popen(
        [sys.executable, "-m", "grader.cli.main", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def release_once_waiting(proc: subprocess.Popen[str], holder: LockHolder) -> str:
    """Let the lock go a second after the run said it waits for it; the line it said."""
    assert proc.stderr is not None
    line = proc.stderr.readline()
    time.sleep(1.0)
    holder.release()
    return line


def finish(
    proc: subprocess.Popen[str], files: GradeFiles, server: FakeServer, store: Path, first: str = ""
) -> str:
    """Wait for the run; check it stored every answer, paid once each, with no traceback."""
    _, rest = proc.communicate(timeout=120)
    err = first + rest
    assert proc.returncode == 0, err
    assert "Traceback" not in err
    assert "store busy, waiting (held by another process)" in err
    assert server.counts["requests"] == files.n_pairs
    assert stored(store) == files.n_pairs
    assert not journal_path(store).exists()
    return err


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


@pytest.fixture
def slow_server(fake_server: FakeServer) -> Iterator[FakeServer]:
    fake_server.latency_ms = 60.0
    yield fake_server


@pytest.mark.slow
def test_lock_held_mid_run_loses_no_answer(slow_server: FakeServer, tmp_path: Path) -> None:
    files = write_grade_files(tmp_path, n_queries=10, depth=8)  # 80 pairs, ~1.5 s of requests
    store, out = tmp_path / "s.db", tmp_path / "j.jsonl"
    released = slow_server.hold_replies_after(16)  # the run cannot finish before the lock
    proc = start(files, slow_server, store, out)
    deadline = time.monotonic() + 60
    while stored(store) < 8:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.02)
    holder = LockHolder(store)  # held until the run says it journaled what it holds
    released.set()  # answers come while the lock is held: they wait, then go to the journal
    assert proc.stderr is not None
    said = ""
    while "in the journal" not in said:  # (each answer is journaled as it comes, too)
        line = proc.stderr.readline()
        assert line, proc.communicate()
        said += line
    holder.release()
    err = finish(proc, files, slow_server, store, said)
    assert "in the journal" in err  # the wait grew past the threshold: answers were made safe
    assert "store free again" in err
    judgments = read_judgments(out)
    assert len({(j.query_id, j.doc_id) for j in judgments}) == files.n_pairs


@pytest.mark.slow
def test_lock_taken_before_start_waits_then_works(slow_server: FakeServer, tmp_path: Path) -> None:
    files = write_grade_files(tmp_path, n_queries=2, depth=4)
    store, out = tmp_path / "s.db", tmp_path / "j.jsonl"
    Store(store).close()
    holder = LockHolder(store)  # the run's first write (the texts) meets the lock
    proc = start(files, slow_server, store, out)
    first = release_once_waiting(proc, holder)
    assert "writing to the store" in first
    finish(proc, files, slow_server, store, first)


@pytest.mark.slow
def test_pending_migration_waits_for_the_lock(slow_server: FakeServer, tmp_path: Path) -> None:
    files = write_grade_files(tmp_path, n_queries=2, depth=4)
    store, out = tmp_path / "s.db", tmp_path / "j.jsonl"
    conn = sqlite3.connect(store, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    for migration in store_migrations.MIGRATIONS[:2]:  # a store of an older relgrade
        for statement in migration.statements:
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {migration.version}")
    conn.close()
    holder = LockHolder(store)
    proc = start(files, slow_server, store, out)
    first = release_once_waiting(proc, holder)
    assert "schema migration 3" in first
    err = finish(proc, files, slow_server, store, first)
    assert "not a usable relgrade store" not in err
    with Store(store) as opened:
        assert opened.schema_version == store_migrations.latest_version()


@pytest.mark.slow
def test_writer_journals_a_long_wait_and_stores_everything(tmp_path: Path) -> None:
    events: list[StoreBusyEvent] = []
    path = tmp_path / "s.db"
    os.environ.update(BUSY_ENV)
    try:
        store = Store(path, on_busy=events.append)
    finally:
        for name in BUSY_ENV:
            del os.environ[name]
    writer = StoreWriter(store)
    writer.journal_after_s = 0.3
    holder = LockHolder(path)
    writer.add_group([(ok("k1"), FP)])
    writer.log_call(call_record("k1"))
    flushing = threading.Thread(target=writer.flush)
    flushing.start()
    deadline = time.monotonic() + 10
    while not store.journal.pending():
        assert time.monotonic() < deadline, "answers never reached the journal"
        time.sleep(0.02)
    writer.add_group([(ok("k2", qid="q2"), FP)])  # queued while the flush waits: taken by it too
    # The flush journals it on its next round (not a set time).
    while store.journal.path.read_text().count('{"judgment"') < 2:
        assert time.monotonic() < deadline, "the answer added during the wait was not taken"
        time.sleep(0.02)
    holder.release()
    flushing.join(timeout=10)
    assert not flushing.is_alive()
    writer.flush()
    assert store.count(status="ok") == 2
    assert len(store.calls("k1")) == 1
    assert not store.journal.pending()
    assert events[0].what == "writing answers" and not events[0].over
    assert events[-1].over and events[-1].journaled == 2
    store.close()


@pytest.mark.slow
def test_journal_of_a_killed_process_is_replayed_on_open(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    Store(path).close()
    holder = LockHolder(path)
    script = (
        "import time\n"
        "from grader.store.store import Store\n"
        "from grader.store.writer import StoreWriter\n"
        "from tests.helpers.judgments import FP, call_record, ok\n"
        f"store = Store({str(path)!r})\n"
        "writer = StoreWriter(store)\n"
        "writer.journal_after_s = 0\n"
        "writer.add_group([(ok('k1'), FP)])\n"
        "writer.add_group([(ok('k2', qid='q2'), FP)])\n"
        "writer.log_call(call_record('k1'))\n"
        "writer.flush()\n"
    )
    env = {**os.environ, **BUSY_ENV, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stderr=subprocess.PIPE)
    journal = journal_path(path)
    deadline = time.monotonic() + 30
    while not journal.exists() or journal.stat().st_size == 0:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no journal"
        time.sleep(0.02)
    proc.kill()
    proc.wait()
    with journal.open("a") as fh:
        fh.write('{"judgment": ["k3", "q3"')  # a line cut short: never complete, never fsync'd
    holder.release()
    left = journal.read_bytes()
    with Store(path) as store:
        assert store.count(status="ok") == 2
        assert sorted(j.key for j in stored_judgments(store)) == ["k1", "k2"]
        assert len(store.calls("k1")) == 1
        assert {(q, d) for q, d, _ in store.iter_pair_judgments()} == {("q1", "d1"), ("q2", "d1")}
    assert not journal.exists()
    # Replaying the same journal again (a crash between the commit and the removal) adds nothing.
    journal.write_bytes(left)
    with Store(path) as store:
        assert store.count() == 2 and len(store.calls("k1")) == 1


def test_a_bad_journal_line_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    Store(path).close()
    journal_path(path).write_text('{"judgment": ["k1"]\nnot json\n')
    bad = r"relgrade-journal-[0-9a-f]+\.jsonl, line 1: not a journal line"
    with pytest.raises(StoreError, match=bad):
        Store(path)


@pytest.mark.slow
def test_event_loop_keeps_turning_while_the_store_is_busy(
    fake_server: FakeServer, tmp_path: Path
) -> None:
    """The lock is let go only once the loop has turned TURNS times after a write started
    waiting for it: a loop frozen by that wait never gets there (no clock decides)."""
    path = tmp_path / "s.db"
    Store(path).close()
    waiting, turned = threading.Event(), threading.Event()
    os.environ.update(BUSY_ENV)
    try:
        store = Store(path, on_busy=lambda event: waiting.set())
    finally:
        for name in BUSY_ENV:
            del os.environ[name]
    writer = StoreWriter(store)
    writer.journal_after_s = 60
    judge = LLMJudge(
        model="m",
        prompt=load_prompt("passage-v1"),
        base_url=fake_server.base_url,
        api_key="sk-test",
        on_call=writer.log_call,
    )
    pairs = [
        Pair(Query(query_id=f"q{i}", text=f"query {i}"), Doc(doc_id=f"d{i}", text=f"doc {i}"))
        for i in range(6)
    ]
    turns = 15
    holder = LockHolder(path)

    def release_once_turned() -> None:
        turned.wait(120)  # a frozen loop: let go at last, and the assertion below fails
        holder.release()

    releasing = threading.Thread(target=release_once_turned)
    releasing.start()

    async def main() -> int:
        async def ticker() -> None:
            ticks = 0
            while True:
                await asyncio.sleep(0.01)
                ticks += waiting.is_set()
                if ticks >= turns:
                    turned.set()

        task = asyncio.create_task(ticker())
        report = await grade_pairs(pairs, [judge], store=store, writer=writer)
        task.cancel()
        return len(report.judgments)

    assert asyncio.run(main()) == len(pairs)
    releasing.join()
    assert waiting.is_set()  # a write did wait for the lock
    assert turned.is_set()  # and the loop turned while it waited
    assert store.count(status="ok") == len(pairs)
    store.close()


def test_env_durations_and_busy_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELGRADE_STORE_BUSY_TIMEOUT", "500ms")
    assert seconds_from_env("RELGRADE_STORE_BUSY_TIMEOUT", 2.0) == 0.5
    monkeypatch.setenv("RELGRADE_STORE_BUSY_TIMEOUT", "soon")
    with pytest.raises(StoreError, match="RELGRADE_STORE_BUSY_TIMEOUT=2"):
        seconds_from_env("RELGRADE_STORE_BUSY_TIMEOUT", 2.0)
    path = Path("s.db")
    waiting = StoreBusyEvent(path, "writing answers", 3.0, held=5)
    assert busy_text(waiting) == (
        "store busy, waiting (held by another process): s.db, writing answers, 3 s so far; "
        "5 answers kept in memory until it is free"
    )
    over = StoreBusyEvent(path, "writing answers", 4.25, journaled=5, over=True)
    assert busy_text(over).startswith("store free again after 4.2 s: s.db (5 answers")
