"""A full disk under the store loses no paid answer and pays none twice (issue 25, point 4).

The store lives on a small tmpfs (skipped only where it cannot be mounted); `relgrade grade` runs
as a child process against the fake server, and once the server saw requests the test fills the
tmpfs. The run stops with exit 2 and a message naming the file system, no traceback; every answer
it paid for is in the store or a journal; after room is made the rerun stores the journaled
answers first and asks only for the rest. Unit tests inject the disk-full error instead.
"""

from __future__ import annotations

import errno
import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader.cli.main import main
from grader.io.judgments import read_judgments
from grader.store.busy import StoreFullError, is_full
from grader.store.journal import Journal, journals
from grader.store.store import Store
from grader.store.writer import StoreWriter
from tests.fakeserver import FakeServer
from tests.grade_data import GradeFiles, write_grade_files
from tests.helpers.journals import journal_path, read_store_id
from tests.helpers.judgments import FP, ok
from tests.helpers.store_lock import LockHolder

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    """A 3 MB tmpfs (needs root; skipped where it cannot be mounted)."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(folder: Path) -> Path:
    """Fill the file system of `folder` to the last byte; the filler file."""
    filler = folder / "filler"
    block = b"\0" * 65536
    with filler.open("wb", buffering=0) as fh:
        try:
            while True:
                fh.write(block)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    with filler.open("ab", buffering=0) as fh:  # the last partial block
        for size in (4096, 512, 1):
            try:
                while True:
                    fh.write(b"\0" * size)
            except OSError:
                pass
    return filler


def _start(
    files: GradeFiles, server: FakeServer, store: Path, env: dict[str, str]
) -> subprocess.Popen[str]:
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-full", "PYTHONPATH": str(ROOT), **env}
    env.pop("OPENAI_BASE_URL", None)
    env.pop("TMPDIR", None)
    args = files.args("--base-url", server.base_url, "--store", store, "--concurrency", "4")
    return subprocess.Popen(
        [sys.executable, "-m", "grader.cli.main", *args, "--quiet"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stored_ok(store: Path) -> int:
    conn = sqlite3.connect(store, timeout=30)
    try:
        return int(conn.execute("SELECT COUNT(*) FROM judgments WHERE status = 'ok'").fetchone()[0])
    finally:
        conn.close()


def _journaled(store: Path) -> set[str]:
    """The keys of the judgments waiting in the store's journals."""
    keys: set[str] = set()
    paths = [journal_path(store), store.with_name(store.name + ".journal.jsonl")]
    paths += [j.path for j in journals(store, read_store_id(store))[1:]]
    for path in paths:
        if path.exists():
            for line in path.read_text().splitlines():
                entry = json.loads(line)
                if "judgment" in entry:
                    keys.add(entry["judgment"][0])
    return keys


@pytest.mark.slow
def test_a_full_disk_stops_the_run_and_the_rerun_pays_nothing_twice(
    tiny_fs: Path, fake_server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = write_grade_files(tmp_path, n_queries=10, depth=8)  # 80 pairs
    store = tiny_fs / "s.db"
    env = {"XDG_STATE_HOME": str(tmp_path / "state")}  # rescue journals: another disk
    fake_server.latency_ms = 40.0
    proc = _start(files, fake_server, store, env)
    deadline = time.monotonic() + 60
    while fake_server.counts["requests"] < 12:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the run never sent a request"
        time.sleep(0.01)
    filler = _fill(tiny_fs)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    assert "Traceback" not in err
    assert f"no room left on the file system mounted at {tiny_fs} (tmpfs" in err
    paid = fake_server.counts["requests"]
    assert paid < files.n_pairs  # it stopped sending once answers could not be stored
    # Every paid answer is stored or journaled (the tmpfs is full: a rescue journal).
    monkeypatch.setenv("XDG_STATE_HOME", env["XDG_STATE_HOME"])
    journaled = _journaled(store)
    assert journaled, err
    assert "Paid answers not stored are kept: " in err
    assert _stored_ok(store) + len(journaled) >= paid  # (a journal may repeat stored ones)

    # Still full: the rerun stops before paying anything, the journal kept.
    again = _start(files, fake_server, store, env)
    _, err = again.communicate(timeout=120)
    assert again.returncode == 2 and "Traceback" not in err, err
    assert "no room left" in err and fake_server.counts["requests"] == paid

    # A larger disk (the WAL alone may grow to 8 MB): the journaled answers are stored
    # first, the rest asked once.
    subprocess.run(["mount", "-o", "remount,size=32m", str(tiny_fs)], check=True)
    assert filler.exists()
    rerun = _start(files, fake_server, store, env)
    _, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err
    assert fake_server.counts["requests"] == files.n_pairs  # not one paid twice
    assert _stored_ok(store) == files.n_pairs


class _FullOnce:
    """A store whose writes of judgments fail as on a full disk `times` times."""

    def __init__(self, store: Store, times: int) -> None:
        self.store = store
        self.left = times
        self.real = store.put_many

    def __call__(self, *args: Any, **kwargs: Any) -> int:
        if self.left > 0:
            self.left -= 1
            raise StoreFullError(f"{self.store.path}: no room left (injected)")
        return self.real(*args, **kwargs)


def test_answers_of_a_full_disk_go_to_the_journal_and_are_replayed(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = Store(path)
    store.put_many = _FullOnce(store, 1)  # type: ignore[method-assign]
    writer = StoreWriter(store)
    writer.add_group([(ok("k1"), FP)])
    writer.add_group([(ok("k2"), FP)])
    writer.flush()  # does not raise: the answers are kept
    assert isinstance(writer.full, StoreFullError)
    assert store.journal.pending() and writer.kept == {store.journal.path: 2}
    error = writer.full_error()
    assert error is not None and error.exit_code == 2
    assert f"kept: 2 in {store.journal.path}" in str(error)
    store.close()
    with Store(path) as reopened:  # the next run's open stores them
        assert reopened.count(status="ok") == 2
        assert not reopened.journal_pending()


def test_answers_no_journal_takes_stay_in_memory_until_room_is_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")  # a file: no rescue journal's folder can be made under it
    path = tmp_path / "s.db"
    store = Store(path)
    store.rescues = [Journal(blocked / "journals" / "s.journal.jsonl")]
    store.put_many = _FullOnce(store, 1)  # type: ignore[method-assign]
    journal = store.journal

    def no_room(rows: object, **kw: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(journal, "append", no_room)
    writer = StoreWriter(store)
    writer.add_group([(ok("k1"), FP)])
    writer.flush()
    assert [j.key for j in writer.unsaved()] == ["k1"]
    assert "1 paid answers could not be written anywhere" in str(writer.full_error())
    writer.flush()  # room again: the answer kept in memory is stored
    assert writer.unsaved() == [] and store.count(status="ok") == 1
    store.close()


def test_a_full_disk_is_told_from_other_errors() -> None:
    assert is_full(sqlite3.OperationalError("database or disk is full"))
    assert is_full(OSError(errno.ENOSPC, "No space left on device"))
    assert not is_full(sqlite3.OperationalError("database is locked"))
    assert not is_full(OSError(errno.EACCES, "Permission denied"))


def test_answers_no_disk_takes_are_written_to_out_and_the_run_exits_2(
    fake_server: FakeServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = write_grade_files(tmp_path, n_queries=2, depth=3)

    def full(self: Store, *args: Any, **kwargs: Any) -> int:
        raise StoreFullError(f"{self.path}: no room left (injected)")

    def no_room(self: Journal, rows: object, **kw: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Store, "put_many", full)
    monkeypatch.setattr(Journal, "append", no_room)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-full")
    out = tmp_path / "out.jsonl"
    args = ["--base-url", fake_server.base_url, "--store", str(tmp_path / "s.db")]
    code = main(files.args(*args, "--out", str(out), "--concurrency", "1", "--quiet"))
    err = capsys.readouterr().err
    assert code == 2, err
    paid = fake_server.counts["requests"]
    assert 1 <= paid <= files.n_pairs
    assert f"{paid} paid answers that could not be stored are in {out}" in err
    assert f"{paid} paid answers could not be written anywhere" in err
    assert len(read_judgments(out)) == paid
    # Room again: the rerun reads those answers back from --out (they carry the store's id
    # and their row) instead of paying for them again.
    monkeypatch.undo()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-full")
    code = main(files.args(*args, "--out", str(out), "--concurrency", "1", "--quiet"))
    err = capsys.readouterr().err
    assert code == 0, err
    assert f"{paid} paid answers a full disk left in {out} are now stored" in err
    assert fake_server.counts["requests"] == files.n_pairs  # not one paid twice
    assert len(read_judgments(out)) == files.n_pairs


def test_answers_left_in_out_for_another_store_are_not_read_back(
    fake_server: FakeServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The same --out given with a new store (another id): its lines are not that store's
    answers, and are asked again."""
    files = write_grade_files(tmp_path, n_queries=1, depth=3)

    def full(self: Store, *args: Any, **kwargs: Any) -> int:
        raise StoreFullError(f"{self.path}: no room left (injected)")

    def no_room(self: Journal, rows: object, **kw: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patched:
        patched.setattr(Store, "put_many", full)
        patched.setattr(Journal, "append", no_room)
        patched.setenv("OPENAI_API_KEY", "sk-test-full")
        out = tmp_path / "out.jsonl"
        first = ["--base-url", fake_server.base_url, "--store", str(tmp_path / "a.db")]
        assert main(files.args(*first, "--out", str(out), "--concurrency", "1", "--quiet")) == 2
    paid = fake_server.counts["requests"]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-full")
    other = ["--base-url", fake_server.base_url, "--store", str(tmp_path / "b.db")]
    assert main(files.args(*other, "--out", str(out), "--concurrency", "1", "--quiet")) == 0
    assert "are now stored" not in capsys.readouterr().err
    assert fake_server.counts["requests"] == paid + files.n_pairs


def test_an_io_error_on_a_full_file_system_is_a_full_disk(tiny_fs: Path) -> None:
    """Opening a store on a file system with no room fails as a "disk I/O error" (the WAL
    index cannot grow): said as a full disk, naming the file system, not as a broken store."""
    path = tiny_fs / "s.db"
    Store(path).close()
    _fill(tiny_fs)
    with pytest.raises(
        StoreFullError, match=f"no room left on the file system mounted at {tiny_fs}"
    ):
        Store(path).close()


def test_a_busy_store_whose_journal_disk_is_full_journals_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process holds the lock past the journal threshold and the journal's disk is
    full: the answers go to the rescue journal, and are stored once the lock is free."""
    monkeypatch.setenv("RELGRADE_STORE_BUSY_TIMEOUT", "0.05s")
    path = tmp_path / "s.db"
    store = Store(path)
    rescue = Journal(tmp_path / "rescue" / "s.journal.jsonl")
    store.rescues = [rescue]

    def no_room(rows: object, **kw: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(store.journal, "append", no_room)
    writer = StoreWriter(store)
    writer.journal_after_s = 0
    writer.add_group([(ok("k1"), FP)])
    holder = LockHolder(path)
    flushing = threading.Thread(target=writer.flush)
    flushing.start()
    deadline = time.monotonic() + 60
    while not rescue.pending():
        assert time.monotonic() < deadline, "the answer never reached the rescue journal"
        time.sleep(0.01)
    holder.release()
    flushing.join(timeout=60)
    assert not flushing.is_alive()
    assert store.count(status="ok") == 1 and not rescue.pending()
    assert writer.full is None
    store.close()
