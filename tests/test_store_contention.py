"""Several `relgrade grade` processes on one store pay for each pair once and agree with it.

The processes are real subprocesses; ONE fake server on a real socket (in this process) answers
them all with a grade that changes with every request, and counts what it receives. A paid-twice
pair shows up as a second request with the same text; a process whose `--out` kept its own
answer instead of the stored one shows up as a grade that differs from the store's.
"""

from __future__ import annotations

import collections
import itertools
import os
import re
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from grader.io.judgments import read_judgments
from grader.models import Judgment, JudgmentError
from grader.store.claims import ClaimBook, Outcome, pid_alive
from grader.store.store import Store
from tests.fakeserver import FakeServer, request_text
from tests.grade_data import GradeFiles, write_grade_files
from tests.helpers.judgments import stored_judgments as judgments_in
from tests.helpers.store_lock import leased

ROOT = Path(__file__).resolve().parents[1]


class CountingGrades:
    """A grade per request from a counter: two answers for one pair (almost always) differ."""

    def __init__(self) -> None:
        self._next = itertools.count()
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> int:
        with self._lock:
            return next(self._next) % 4


@pytest.fixture
def server() -> Any:
    with FakeServer(latency_ms=30.0) as srv:
        srv.grade_fn = CountingGrades()
        yield srv


def start(files: GradeFiles, server: FakeServer, store: Path, out: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-contention", "PYTHONPATH": str(ROOT)}
    env.pop("OPENAI_BASE_URL", None)
    args = files.args(
        "--base-url", server.base_url, "--store", store, "--concurrency", "4", "--out", out
    )
    return subprocess.Popen(
        [sys.executable, "-m", "grader.cli.main", *args, "--quiet"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def query(store: Path, sql: str) -> list[tuple[Any, ...]]:
    if not store.exists():
        return []
    conn = sqlite3.connect(store, timeout=30)
    try:
        return conn.execute(sql).fetchall()
    except sqlite3.OperationalError:  # not created / migrated yet
        return []
    finally:
        conn.close()


def stored_judgments(store: Path) -> dict[str, Judgment]:
    with Store(store) as s:
        return {j.key: j for j in judgments_in(s)}


def paid_per_pair(server: FakeServer) -> collections.Counter[str]:
    """How many requests the server received for each pair (by the request's text)."""
    return collections.Counter(request_text(body) for body in server.requests)


def assert_out_equals_store(out: Path, stored: dict[str, Judgment], n_pairs: int) -> None:
    judgments = read_judgments(out)
    assert len({(j.query_id, j.doc_id) for j in judgments}) == len(judgments) == n_pairs
    for j in judgments:
        assert j.status == "ok"
        assert (j.grade, j.created_at) == (stored[j.key].grade, stored[j.key].created_at), j


@pytest.mark.slow
@pytest.mark.parametrize(
    "n_procs", [2, pytest.param(3, marks=pytest.mark.slow), pytest.param(4, marks=pytest.mark.slow)]
)
def test_concurrent_runs_pay_each_pair_once_and_agree_with_the_store(
    server: FakeServer, tmp_path: Path, n_procs: int
) -> None:
    files = write_grade_files(tmp_path, n_queries=8, depth=6)  # 48 pairs
    store = tmp_path / "s.db"
    # Replies are held until every process has claimed a pair, so every process plans
    # before any answer is stored: each one, alone, would pay for all 48 pairs.
    released = server.hold_replies_after(0)
    outs = [tmp_path / f"out{i}.jsonl" for i in range(n_procs)]
    try:
        procs = [start(files, server, store, out) for out in outs]
        deadline = time.monotonic() + 60
        while len(query(store, "SELECT DISTINCT owner FROM claims")) < n_procs:
            assert all(p.poll() is None for p in procs), [p.communicate() for p in procs]
            assert time.monotonic() < deadline, "the processes never all claimed a pair"
            time.sleep(0.01)
    finally:
        released.set()
    results = [p.communicate(timeout=120) for p in procs]
    for proc, (_, err) in zip(procs, results, strict=True):
        assert proc.returncode == 0, err

    paid = paid_per_pair(server)
    assert server.counts["requests"] == files.n_pairs
    assert len(paid) == files.n_pairs and set(paid.values()) == {1}
    stored = stored_judgments(store)
    assert len(stored) == files.n_pairs
    assert all(j.status == "ok" for j in stored.values())
    for out in outs:
        assert_out_equals_store(out, stored, files.n_pairs)
    # Each pair was graded by exactly one process; the others took its answer (cached). Every
    # process paid for some: each one planned while pairs were still unanswered.
    graded = [int(err.split("graded ")[1].split(",")[0]) for _, err in results]
    assert sum(graded) == files.n_pairs
    # Answers a process waited on and took from the store are said beside its cached count.
    adopted = []
    for _, err in results:
        counted = re.search(r"cached (\d+)", err)
        assert counted is not None, err
        cached = int(counted.group(1))
        said = re.search(r"; (\d+) answers were paid by another process", err)
        adopted.append(int(said.group(1)) if said else 0)
        assert adopted[-1] <= cached  # one judge: an adopted answer is a cached pair
    assert sum(adopted) > 0, "the processes overlapped, so some waited on another's answer"
    assert all(g > 0 for g in graded), graded
    assert query(store, "SELECT COUNT(*) FROM claims") == [(0,)]  # every lease released


@pytest.mark.slow
def test_a_killed_process_leases_are_taken_over(server: FakeServer, tmp_path: Path) -> None:
    files = write_grade_files(tmp_path, n_queries=6, depth=6)  # 36 pairs
    store, out = tmp_path / "s.db", tmp_path / "out.jsonl"
    server.latency_ms = 150.0
    first = start(files, server, store, tmp_path / "first.jsonl")
    deadline = time.monotonic() + 60
    while not query(store, "SELECT 1 FROM judgments LIMIT 8 OFFSET 7"):
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline, "no progress"
        time.sleep(0.01)
    first.kill()
    first.wait()
    stranded = query(store, f"SELECT key FROM claims WHERE pid = {first.pid}")
    assert 1 <= len(stranded) <= 4  # its calls in flight (--concurrency 4)
    done = query(store, "SELECT COUNT(*) FROM judgments")[0][0]
    paid_before = server.counts["requests"]
    assert paid_before <= done + 4

    second = start(files, server, store, out)
    _, err = second.communicate(timeout=60)  # far less than the lease's expiry
    assert second.returncode == 0, err
    stored = stored_judgments(store)
    assert len(stored) == files.n_pairs
    assert {k for (k,) in stranded} <= set(stored)
    # Paid: each pair once, plus at most the killed process's calls in flight.
    assert server.counts["requests"] <= files.n_pairs + 4
    assert server.counts["requests"] - paid_before == files.n_pairs - done
    assert_out_equals_store(out, stored, files.n_pairs)
    assert query(store, "SELECT COUNT(*) FROM claims") == [(0,)]


# ---- the leases and the store's rules, in process ----------------------------------------------


def _judgment(key: str, grade: int | None, **extra: Any) -> Judgment:
    if grade is None:
        return Judgment(
            query_id="q",
            doc_id="d",
            status="failed",
            judge="j",
            key=key,
            error=JudgmentError(type="X", message="boom"),
            **extra,
        )
    return Judgment(query_id="q", doc_id="d", status="ok", grade=grade, judge="j", key=key, **extra)


def test_first_ok_answer_is_final(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        assert store.put_many([(_judgment("k", None), None)]) == 1
        assert store.put_many([(_judgment("k", 2), None)]) == 1  # an ok answer replaces a failure
        assert store.put_many([(_judgment("k", 0), None)]) == 0  # but not another ok answer
        assert store.put_many([(_judgment("k", None), None)]) == 0
        assert store.get_many(["k"])["k"].grade == 2
        # An output built from answers (an ensemble's) is rebuilt from more answers.
        assert store.put_many([(_judgment("e", 1, judges={"a": 1, "b": None}), None)]) == 1
        assert store.put_many([(_judgment("e", 2, judges={"a": 1, "b": 3}), None)]) == 1
        assert store.get_many(["e"])["e"].grade == 2


@pytest.mark.slow
def test_a_lease_is_held_released_on_store_and_taken_over_when_it_ends(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with Store(path) as store:
        mine, other = ClaimBook(path), ClaimBook(path, lease_s=1.0)  # not expired before HELD
        try:
            assert other.claim_many(["a", "b"])["a"].outcome is Outcome.CLAIMED
            assert mine.claim_many(["a"])["a"].outcome is Outcome.HELD
            # Storing the answer releases the lease in the same transaction.
            store.put_many([(_judgment("a", 3), None)])
            assert leased(other) == ["b"]
            claim = mine.claim_many(["a"])["a"]
            assert claim.outcome is Outcome.STORED
            assert claim.judgment is not None and claim.judgment.grade == 3
            # A lease of a live process on this host is held past its expiry (it may only be
            # kept from renewing); one from another host is taken over once it expires.
            assert mine.claim_many(["b"])["b"].outcome is Outcome.HELD
            time.sleep(1.1)
            assert mine.claim_many(["b"])["b"].outcome is Outcome.HELD
            with sqlite3.connect(path) as conn:
                conn.execute("UPDATE claims SET host = 'elsewhere' WHERE key = 'b'")
            conn.close()
            assert mine.claim_many(["b"])["b"].outcome is Outcome.CLAIMED
            assert mine.taken_over == 1 and leased(other) == []
            assert mine.renew() == 1
            mine.release_all()
            assert leased(mine) == []
        finally:
            mine.close()
            other.close()


def test_a_lease_of_a_dead_process_is_taken_over_at_once(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    Store(path).close()
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    pid = int(dead.stdout)
    assert not pid_alive(pid, None)
    assert pid_alive(os.getpid(), None)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute(
            "INSERT INTO claims VALUES ('k', 'gone', ?, NULL, ?, ?, ?)",
            (pid, socket.gethostname(), time.time(), time.time() + 3600),
        )
    conn.close()
    book = ClaimBook(path)
    try:
        assert book.claim_many(["k"])["k"].outcome is Outcome.CLAIMED
        assert book.taken_over == 1
    finally:
        book.close()
