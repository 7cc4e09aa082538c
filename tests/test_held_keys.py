"""Leases have an end on both sides. A pair whose key another live process holds is waited for,
but not forever: a process that keeps renewing its lease and never answers (hung) makes a run
stop waiting after `HOLD_WAIT_S`, leave that pair not done, store everything else, and write no
partial outputs. And releasing a run's own leases at its end never fails the run."""

from __future__ import annotations

import shutil
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.grading import run as grading_run
from grader.store import claims
from grader.store.claims import _process_start
from grader.store.store import Store
from tests.batch_helpers import new_prompt, seed_store
from tests.fakeserver import FakeServer
from tests.grade_data import write_grade_files
from tests.helpers.judgments import stored_judgments
from tests.helpers.store_lock import leased


@pytest.fixture
def other_process() -> Iterator[subprocess.Popen[bytes]]:
    """A live process on this host, standing for a run that holds a lease and never answers."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    yield proc
    proc.kill()
    proc.wait()


def _hold(db: Path, key: str, owner: subprocess.Popen[bytes]) -> None:
    """The lease on `key` of a live process that keeps renewing it."""
    with sqlite3.connect(db) as conn:
        conn.execute(
            "INSERT INTO claims VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                key,
                "hung-owner",
                owner.pid,
                _process_start(owner.pid),
                socket.gethostname(),
                time.time(),
                time.time() + 3600,
            ),
        )
    conn.close()


@pytest.mark.slow
def test_a_key_held_by_a_hung_process_is_not_waited_for_forever(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    other_process: subprocess.Popen[bytes],
) -> None:
    monkeypatch.setattr(grading_run, "HOLD_WAIT_S", 0.5)
    files = write_grade_files(tmp_path, n_queries=2, depth=3)
    db, out = tmp_path / "s.db", tmp_path / "j.jsonl"
    # The content key of one pair (keys do not depend on the store): from a run elsewhere.
    assert main(files.args("--judge", "lexical", "--store", tmp_path / "keys.db", "--quiet")) == 0
    with Store(tmp_path / "keys.db") as store:
        key = next(stored_judgments(store)).key
    with Store(db):
        pass  # the schema, so the lease can be written before the run
    _hold(db, key, other_process)
    capsys.readouterr()
    code = main(files.args("--judge", "lexical", "--store", db, "--out", out))
    err = capsys.readouterr().err
    assert code == 1
    assert "1 pairs are being graded by another process sharing the store" in err
    assert f"{files.n_pairs - 1} of {files.n_pairs} pairs done and stored" in err
    assert "outputs not written" in err and not out.exists()
    with Store(db) as store:
        assert store.count(status="ok") == files.n_pairs - 1
        assert store.statuses([key]) == {}  # neither paid nor failed: a rerun takes it
    # The other process is gone: its lease is taken over at once and the pair graded.
    other_process.kill()
    other_process.wait()
    assert main(files.args("--judge", "lexical", "--store", db, "--out", out, "--quiet")) == 0
    assert len(out.read_text().splitlines()) == files.n_pairs


def test_releasing_leases_under_a_held_write_lock_does_not_fail_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At a run's end its leftover leases are released; another process holding the store's
    write lock all the while makes that a no-op (the leases die with the process), not an
    error that would cost the run its outputs."""
    monkeypatch.setattr(claims, "BUSY_TIMEOUT_S", 0.2)
    db = tmp_path / "s.db"
    with Store(db):
        pass
    book = claims.ClaimBook(db)
    assert book.claim_many(["k1"])["k1"].outcome is claims.Outcome.CLAIMED
    other = sqlite3.connect(db, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process writing for longer than the wait
    assert book.release_all() is False
    other.execute("ROLLBACK")
    other.close()
    assert leased(book) == ["k1"]
    assert book.release_all() is True and leased(book) == []
    book.close()


@pytest.mark.slow
def test_a_live_regrade_says_which_pending_pairs_another_process_holds(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    other_process: subprocess.Popen[bytes],
) -> None:
    """Not "waiting in batches": no batch is open; a hung process holds one new key."""
    monkeypatch.setattr(grading_run, "HOLD_WAIT_S", 0.5)
    db, copy = tmp_path / "s.db", tmp_path / "copy.db"
    seed_store(db, 6)
    shutil.copy(db, copy)
    prompt = new_prompt(tmp_path)
    with FakeServer() as server:
        args = ["regrade", "--prompt", str(prompt.source), "--model", "fake-model"]
        args += ["--base-url", server.base_url, "--quiet"]
        assert main([*args, "--store", str(copy)]) == 0  # learns the new keys elsewhere
        with Store(copy) as store:
            key = next(j.key for j in stored_judgments(store) if j.prompt == prompt.ref())
        _hold(db, key, other_process)
        capsys.readouterr()
        assert main([*args, "--store", str(db), "--out", str(tmp_path / "o.jsonl")]) == 1
    err = capsys.readouterr().err
    assert "1 pairs are being graded by another process sharing the store" in err
    assert "waiting in batches" not in err
    assert not (tmp_path / "o.jsonl").exists()
