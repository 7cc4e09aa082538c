"""`batch import`'s forked workers and SQLite's locks: a forked worker inherits its parent's
in-process record of the locks it holds on the store's files (SQLite warns against carrying a
connection across fork for this), so the parent must hold no transaction's lock when it forks."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from grader.batch.files import import_files
from grader.cli.main import main
from tests.fakeserver import FakeServer
from tests.helpers.batch_import import engine_results, export_pairs, import_results


def _posix_locks(pid: int, inodes: dict[int, str]) -> list[tuple[str, str, int, str]]:
    """The POSIX locks process `pid` holds on the files of these inodes (inode: name), from
    /proc/locks: (name, READ or WRITE, first byte, last byte)."""
    held = []
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "->" in fields or len(fields) < 8 or fields[1] != "POSIX":
            continue  # (a waiter, or another kind of lock)
        inode = int(fields[5].rsplit(":", 1)[1])
        if int(fields[4]) == pid and inode in inodes:
            held.append((inodes[inode], fields[3], int(fields[6]), fields[7]))
    return held


SHARED_FIRST = (1 << 30) + 2  # SQLite's SHARED lock range of a database file starts here
SHM_DMS = 128  # the shared-memory file's byte every connection with it open holds a read lock on


@pytest.mark.skipif(
    not Path("/proc/locks").exists() or import_files._START_METHOD != "fork",
    reason="workers are forked, and /proc/locks tells who holds locks, on Linux",
)
@pytest.mark.parametrize("through", ["Importer", "cli"])
def test_workers_are_forked_while_the_importer_holds_no_lock_on_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, through: str
) -> None:
    """A forked worker inherits SQLite's in-process record of the locks its parent holds on
    the store's files (SQLite warns against carrying a connection across fork for this): its
    connections count those as their own and do not take them. At each fork of an import
    with two workers, the parent holds only what an open WAL connection always holds (the
    database's SHARED lock, the shared memory's DMS byte), which stand while the parent lives
    and a worker ends with it; no lock of a read or write transaction (the log's read marks,
    its write and checkpoint locks; RESERVED and above on the database), which the workers'
    reads rely on."""
    db, requests = export_pairs(tmp_path, 300)
    results = engine_results(FakeServer(), requests, tmp_path / "res", bad={"7"})
    forks: list[list[tuple[str, str, int, str]]] = []
    fork = os.fork

    def checked_fork() -> int:
        names = {"db": db, "wal": Path(f"{db}-wal"), "shm": Path(f"{db}-shm")}
        inodes = {p.stat().st_ino: name for name, p in names.items() if p.exists()}
        forks.append(_posix_locks(os.getpid(), inodes))
        return fork()

    monkeypatch.setattr(os, "fork", checked_fork)
    if through == "cli":  # (`relgrade batch import`, which opens the store itself)
        command = ["batch", "import", "--store", str(db), *map(str, results), "--workers", "2"]
        assert main([*command, "--quiet"]) == 1  # (one line failed)
    else:
        summary = import_results(db, results, 2)
        assert (summary.ok, summary.failed) == (299, 1)
    monkeypatch.undo()
    assert len(forks) == 2  # two workers
    for held in forks:
        assert held  # (the check sees the parent's standing locks)
        standing = {("db", "READ", SHARED_FIRST), ("shm", "READ", SHM_DMS)}
        assert {(name, kind, first) for name, kind, first, _ in held} <= standing, held
