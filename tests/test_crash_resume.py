"""Killing `relgrade grade` (SIGKILL, or Ctrl-C) mid-run and rerunning finishes the work with
every pair graded exactly once. relgrade runs as a subprocess; the fake server runs here, so
its request count covers both runs."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.io.judgments import read_judgments
from grader.store.store import Store
from tests.fakeserver import FakeServer
from tests.grade_data import GradeFiles, write_grade_files

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def stored(store: Path) -> int:
    if not store.exists():
        return 0
    conn = sqlite3.connect(store, timeout=30)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM judgments WHERE status = 'ok'").fetchone()[0])
    except sqlite3.OperationalError:  # not migrated yet
        return 0
    finally:
        conn.close()


def start(files: GradeFiles, server: FakeServer, store: Path, out: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-crash", "PYTHONPATH": str(ROOT)}
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


def wait_for_rows(store: Path, proc: subprocess.Popen[str], at_least: int) -> None:
    deadline = time.monotonic() + 60
    while stored(store) < at_least:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.05)


@pytest.fixture
def slow_server(fake_server: FakeServer) -> FakeServer:
    fake_server.latency_ms = 40.0
    return fake_server


@pytest.mark.parametrize("how", ["SIGKILL", "SIGINT"])
def test_killed_run_resumes_and_grades_each_pair_once(
    slow_server: FakeServer, tmp_path: Path, how: str
) -> None:
    files = write_grade_files(tmp_path, n_queries=10, depth=8)  # 80 pairs, ~1 s of work
    store, out = tmp_path / "s.db", tmp_path / "j.jsonl"
    released = slow_server.hold_replies_after(20)  # the run cannot finish before the signal
    proc = start(files, slow_server, store, out)
    wait_for_rows(store, proc, 12)
    if how == "SIGKILL":
        proc.kill()
        proc.wait()
        released.set()
    else:
        proc.send_signal(signal.SIGINT)
        released.set()  # the calls in flight answer; nothing new is asked after the Ctrl-C
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        assert "rerun the same command" in err
        assert not out.exists()  # outputs wait for a complete run
    Store(store).close()  # a killed run's journal is replayed when the store opens
    done = stored(store)
    assert 12 <= done < files.n_pairs
    sent_before = slow_server.counts["requests"]

    proc = start(files, slow_server, store, out)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    # The rerun asks exactly for what the killed run had not stored.
    assert slow_server.counts["requests"] - sent_before == files.n_pairs - done
    assert stored(store) == files.n_pairs
    judgments = read_judgments(out)
    assert len({(j.query_id, j.doc_id) for j in judgments}) == len(judgments) == files.n_pairs
    if how == "SIGINT":
        # A clean stop loses nothing: every request it sent was stored.
        assert sent_before == done
