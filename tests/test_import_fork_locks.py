"""`batch import`'s forked workers and SQLite's locks: a forked worker inherits its parent's
in-process record of the locks it holds on the store's files (SQLite warns against carrying a
connection across fork for this), so the parent must be in no transaction when it forks: then
another process can take the store's write lock, and copy its whole log into the store, at once."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from grader.batch.files import import_files
from grader.cli.main import main
from tests.fakeserver import FakeServer
from tests.helpers.batch_import import engine_results, export_pairs, import_results

# Another process: the write lock at once, then a checkpoint of the whole log (busy when a
# reader holds a mark in it), without waiting; prints the checkpoint's busy flag.
_OTHER_PROCESS = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
conn.execute("ROLLBACK")
print(conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0])
"""


@pytest.mark.slow
@pytest.mark.skipif(
    import_files._START_METHOD != "fork", reason="workers are forked where the platform can"
)
@pytest.mark.parametrize("through", ["Importer", "cli"])
def test_the_worker_is_forked_while_the_importer_is_in_no_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, through: str
) -> None:
    """At the fork of an import's worker, another process takes the store's write lock and
    checkpoints the whole log without waiting: the importer holds no write lock and no read
    mark in the log (the lock of a read or write transaction, which the worker would count
    as its own). One worker: a second one's reads would hold marks of their own."""
    db, requests = export_pairs(tmp_path, 300)
    results = engine_results(FakeServer(), requests, tmp_path / "res", bad={"7"})
    # A log to copy: frames written and left there by a connection held open meanwhile.
    keeper = sqlite3.connect(db, isolation_level=None)
    keeper.execute("PRAGMA wal_autocheckpoint = 0")
    keeper.execute("CREATE TABLE scratch (x)")
    keeper.execute("DROP TABLE scratch")
    checks: list[subprocess.CompletedProcess[str]] = []
    fork = os.fork

    def checked_fork() -> int:
        command = [sys.executable, "-c", _OTHER_PROCESS, str(db)]
        checks.append(subprocess.run(command, capture_output=True, text=True, timeout=60))
        return fork()

    monkeypatch.setattr(os, "fork", checked_fork)
    if through == "cli":  # (`relgrade batch import`, which opens the store itself)
        command = ["batch", "import", "--store", str(db), *map(str, results), "--workers", "1"]
        assert main([*command, "--quiet"]) == 1  # (one line failed)
    else:
        summary = import_results(db, results, 1)
        assert (summary.ok, summary.failed) == (299, 1)
    monkeypatch.undo()
    keeper.close()
    assert len(checks) == 1  # one worker
    (check,) = checks
    assert check.returncode == 0, check.stderr  # the write lock was free
    assert check.stdout.strip() == "0"  # no reader's mark kept the log from being copied
