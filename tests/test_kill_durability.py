"""Answers durable before they are counted: a real `relgrade grade` process (and one
`rg.grade` in a Python process, as a Jupyter kernel runs it) killed with SIGKILL at seeded
random moments against the fake server, which counts the answers it sent; after the kills and a
final clean rerun, the answers paid equal the distinct requests stored. And each store's
journal is named by the store's id: a store moved with its journal finds it, an orphan journal
is never replayed into another store made at the old path."""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from grader.store.store import Store
from tests.fakeserver import FakeServer
from tests.grade_data import GradeFiles, write_grade_files
from tests.helpers.journals import journal_path

ROOT = Path(__file__).resolve().parents[1]
KILLS = 12
SEED = 36
CONCURRENCY = 8


def _env() -> dict[str, str]:
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-kill", "PYTHONPATH": str(ROOT)}
    env.pop("OPENAI_BASE_URL", None)
    return env


def _grade(files: GradeFiles, server: FakeServer, store: Path) -> subprocess.Popen[bytes]:
    args = files.args(
        "--base-url", server.base_url, "--store", store, "--concurrency", str(CONCURRENCY)
    )
    return subprocess.Popen(
        [sys.executable, "-m", "grader.cli.main", *args, "--quiet"],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


API_CHILD = """
import sys, relgrade as rg
rg.grade(runs=sys.argv[1], queries=sys.argv[2], docs=sys.argv[3], store=sys.argv[4],
         base_url=sys.argv[5], concurrency=int(sys.argv[6]), progress=False)
"""


def _api(files: GradeFiles, server: FakeServer, store: Path) -> subprocess.Popen[bytes]:
    args = [files.run, files.queries, files.docs, store, server.base_url, CONCURRENCY]
    return subprocess.Popen(
        [sys.executable, "-c", API_CHILD, *map(str, args)],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _stored_keys(store: Path) -> int:
    if not store.exists():
        return 0
    Store(store).close()  # a killed run's journal is replayed when the store opens
    with sqlite3.connect(store) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM judgments WHERE status = 'ok'").fetchone()[0])


def _kill_at_random_moments(start: Any, files: GradeFiles, server: FakeServer, store: Path) -> int:
    """Start a run and kill it at a seeded random moment once it has had answers, again and
    again, then a clean run to the end; the answers lost over all kills. A kill can lose only
    answers still on their way into the process (sent by the server, not yet read and made a
    judgment): at most one per request in flight (--concurrency) a kill."""
    delays = random.Random(SEED)
    lost = 0
    for _ in range(KILLS):
        answered, stored = server.answers["answered"], _stored_keys(store)
        proc = start(files, server, store)
        deadline = time.monotonic() + 60
        while server.answers["answered"] == answered and proc.poll() is None:  # its first answer
            assert time.monotonic() < deadline, "no answer"
            time.sleep(0.005)
        time.sleep(delays.uniform(0.0, 0.4))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        time.sleep(0.1)  # the server has counted what it sent
        given = server.answers["answered"] - answered
        kept = _stored_keys(store) - stored
        assert 0 <= given - kept <= CONCURRENCY, f"{given} answers given, {kept} kept"
        lost += given - kept
    final = start(files, server, store)
    _, err = final.communicate(timeout=300)
    assert final.returncode == 0, err
    assert _stored_keys(store) == files.n_pairs
    assert server.answers["answered"] == files.n_pairs + lost  # each lost answer paid twice
    return lost


def _kill_when_idle(start: Any, files: GradeFiles, server: FakeServer, store: Path) -> None:
    """Kill runs at moments when every answer the server sent has been read (the server
    holds the next replies): the answers a run holds (queued for the store, not committed
    yet) all survive the kill. Over the kills and a clean rerun: answers paid == distinct
    requests stored."""
    holds = random.Random(SEED)
    for _ in range(KILLS // 2):
        answered, stored = server.answers["answered"], _stored_keys(store)
        if stored == files.n_pairs:
            break
        release = server.hold_replies_after(server.counts["requests"] + holds.randint(3, 40))
        proc = start(files, server, store)
        last, since = -1, time.monotonic()
        while time.monotonic() - since < 0.5:  # no new answer for 0.5 s: the rest are held
            if server.answers["answered"] != last:
                last, since = server.answers["answered"], time.monotonic()
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        release.set()
        time.sleep(0.1)
        assert _stored_keys(store) - stored == server.answers["answered"] - answered
    final = start(files, server, store)
    _, err = final.communicate(timeout=300)
    assert final.returncode == 0, err
    assert _stored_keys(store) == files.n_pairs
    assert server.answers["answered"] == files.n_pairs  # not one paid twice


@pytest.mark.slow
def test_sigkill_when_answers_are_held_loses_none(fake_server: FakeServer, tmp_path: Path) -> None:
    fake_server.latency_ms = 10.0
    files = write_grade_files(tmp_path, n_queries=20, depth=10)  # 200 pairs
    _kill_when_idle(_grade, files, fake_server, tmp_path / "s.db")


@pytest.mark.slow
def test_sigkill_at_random_moments_loses_at_most_the_answers_in_flight(
    fake_server: FakeServer, tmp_path: Path
) -> None:
    fake_server.latency_ms = 30.0
    files = write_grade_files(tmp_path, n_queries=40, depth=10)  # 400 pairs
    lost = _kill_at_random_moments(_grade, files, fake_server, tmp_path / "s.db")
    print(f"{KILLS} kills at random moments: {lost} answers lost in flight")


@pytest.mark.slow
def test_a_killed_python_kernel_mid_grade_loses_no_answer_it_holds(
    fake_server: FakeServer, tmp_path: Path
) -> None:
    fake_server.latency_ms = 10.0
    files = write_grade_files(tmp_path, n_queries=20, depth=10)
    _kill_when_idle(_api, files, fake_server, tmp_path / "s.db")


def _journal_rows(store: Path, n: int) -> None:
    """A killed run's journal of `n` answers beside `store` (written as the writer writes)."""
    from grader.models import Judgment, Usage

    with Store(store) as opened:
        rows = opened.rows(
            [
                (
                    Judgment(
                        key=f"{i:064x}", query_id=f"q{i}", doc_id="d", judge="openai:m", grade=2,
                        status="ok", usage=Usage(prompt_tokens=10, completion_tokens=2),
                    ),
                    {"model": "m"},
                )
                for i in range(n)
            ]
        )  # fmt: skip
        opened.journal.append(rows, sync=False)


def test_a_store_moved_with_its_journal_finds_it(tmp_path: Path) -> None:
    old, new = tmp_path / "a", tmp_path / "b"
    old.mkdir()
    new.mkdir()
    _journal_rows(old / "s.db", 5)
    journal = journal_path(old / "s.db")
    assert journal.name.startswith("relgrade-journal-") and journal.exists()
    shutil.move(old / "s.db", new / "renamed.db")
    shutil.move(journal, new / journal.name)
    with Store(new / "renamed.db") as moved:
        assert moved.count(status="ok") == 5
    assert not (new / journal.name).exists()


def test_an_orphan_journal_is_never_replayed_into_another_store(tmp_path: Path) -> None:
    folder = tmp_path / "a"
    folder.mkdir()
    _journal_rows(folder / "s.db", 7)
    orphan = journal_path(folder / "s.db")
    (folder / "s.db").unlink()  # the store moved away (or deleted); its journal stayed
    with Store(folder / "s.db") as other:  # a new store at the old path
        assert other.count() == 0
        assert other.journal.path != orphan
    assert orphan.exists()  # kept for its own store


def test_a_store_from_before_ids_replays_its_old_journal(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    _journal_rows(store, 3)
    new_name = journal_path(store)
    with sqlite3.connect(store) as conn:  # as a store made before ids
        conn.execute("DROP TABLE store_identity")
    new_name.rename(store.with_name("s.db.journal.jsonl"))
    with Store(store) as opened:
        assert opened.count(status="ok") == 3
    assert not store.with_name("s.db.journal.jsonl").exists()
