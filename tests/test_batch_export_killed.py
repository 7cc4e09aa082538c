"""A `batch export` killed with SIGKILL never strands a request (issue 38, point 3): a line is
recorded in the store only once its request file is published, so after the kill every
recorded line is in a listed file, and the same command run again covers every pair: it
exports exactly the pairs the killed export did not publish (those it published wait for an
engine), and removes the files the killed export left under their temporary names."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.batch.files.request_files import RequestFiles, drop_stale
from tests.grade_data import write_grade_files
from tests.helpers.batch_cli import custom_ids


def _rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@pytest.mark.slow
def test_a_killed_export_strands_nothing_and_the_next_covers_every_pair(tmp_path: Path) -> None:
    files = write_grade_files(tmp_path, n_queries=300, depth=100)  # 30,000 pairs and texts
    db, out = tmp_path / "s.db", tmp_path / "requests"
    cmd = [sys.executable, "-m", "grader.cli.main", "batch", "export", "--store", str(db)]
    cmd += ["--queries", str(files.queries), "--docs", str(files.docs), "--run", str(files.run)]
    cmd += ["--depth", "100", "--model", "fake-model", "--out-dir", str(out), "--quiet"]
    # Files of 150 lines: each chunk of 2,000 pairs publishes some and leaves one open.
    export = subprocess.Popen([*cmd, "--batch-max-requests", "150"], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(list(out.glob("requests-*.jsonl"))) < 3:
        time.sleep(0.005)
    export.send_signal(signal.SIGKILL)
    export.wait()
    assert export.returncode == -signal.SIGKILL
    assert _rows(db, "SELECT complete FROM exports") == [(0,)]  # killed mid-export
    listed_files = {Path(str(p)) for (p,) in _rows(db, "SELECT path FROM export_files")}
    assert len(listed_files) >= 2
    listed = _rows(db, "SELECT COALESCE(SUM(lines), 0) FROM export_files")[0][0]
    recorded = _rows(db, "SELECT COUNT(*) FROM export_lines")[0][0]
    assert recorded == listed == sum(len(custom_ids(p)) for p in listed_files)  # none stranded
    # Left: files never published, and at most one published but not listed (killed between
    # its rename and the commit that lists it, which the polling above makes likely).
    left = set(out.glob(".*.tmp")) | (set(out.glob("requests-*.jsonl")) - listed_files)
    assert len(set(out.glob("requests-*.jsonl")) - listed_files) <= 1

    again = subprocess.run([*cmd, "--batch-max-requests", "50000"], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    # The killed export's listed files wait for an engine: their pairs alone are left out.
    assert f"{listed:,} pairs left out: their requests wait in export" in again.stderr
    said = f"removed {len(left)} request files a killed export left unlisted"
    assert (said in again.stderr) == bool(left)
    assert not list(out.glob(".*.tmp"))
    second = set(out.glob("requests-*.jsonl")) - listed_files
    assert len(second) == 1
    keys = [c.split(":", 2)[2] for p in [*listed_files, *second] for c in custom_ids(p)]
    assert len(keys) == len(set(keys)) == 30_000  # every pair exported once


def test_what_a_live_export_writes_is_never_dropped(tmp_path: Path) -> None:
    """A file being written, or written whole and not listed yet, is locked: another export
    into the folder leaves it alone, and removes a killed export's files (unlocked)."""
    files = RequestFiles(tmp_path, "live", 3, 10_000)
    for _ in range(4):
        files.add(b'{"a": 1}\n')  # file 1 written whole (not listed yet), file 2 open
    dead_tmp = tmp_path / ".requests-dead-00002.jsonl.tmp"
    dead_tmp.write_bytes(b'{"a": 1}\n')  # never published
    dead_published = tmp_path / "requests-dead-00001.jsonl"
    dead_published.write_bytes(b'{"a": 1}\n')  # published, not listed
    listed = tmp_path / "requests-dead-00003.jsonl"
    listed.write_bytes(b'{"a": 1}\n')  # published and listed: an engine may run it
    other = tmp_path / "requests-other-00001.jsonl"
    other.write_bytes(b'{"a": 1}\n')  # another store's export

    def unlisted(export_id: str, file_no: int) -> bool:
        return export_id == "dead" and file_no != 3

    assert drop_stale(tmp_path, unlisted) == 2
    assert not dead_tmp.exists() and not dead_published.exists()
    assert listed.exists() and other.exists()
    live = [".requests-live-00001.jsonl.tmp", ".requests-live-00002.jsonl.tmp"]
    assert all((tmp_path / name).exists() for name in live)

    (written,) = files.take_written()
    written.release()  # as if its export died before listing it
    assert drop_stale(tmp_path, unlisted) == 1
    assert not (tmp_path / live[0]).exists() and (tmp_path / live[1]).exists()
    files.abandon()
