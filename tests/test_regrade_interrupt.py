"""Ctrl-C on a live `relgrade regrade` tells the truth (issue 25, point 5).

The command runs as a child process against the fake server; SIGINT goes to that child only,
once it shows it started (the server saw requests, or it said it waits for the store), never
after a sleep. It exits 130 with "interrupted: N of M pairs done and stored", N being what the
store holds, claims no batch, prints no traceback, and the rerun pays only for the rest.
"""

from __future__ import annotations

import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.batch_helpers import new_prompt, seed_store
from tests.fakeserver import FakeServer
from tests.helpers.store_lock import LockHolder

ROOT = Path(__file__).resolve().parents[1]
PAIRS = 60


def _start(server: FakeServer, db: Path, prompt: Path, **extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-interrupt", "PYTHONPATH": str(ROOT), **extra}
    for name in ("OPENAI_BASE_URL", "RELGRADE_MODEL", "RELGRADE_PRICES"):
        env.pop(name, None)
    args = ["regrade", "--store", str(db), "--prompt", str(prompt), "--model", "fake-model"]
    args += ["--base-url", server.base_url, "--concurrency", "2", "--quiet"]
    return subprocess.Popen(
        [sys.executable, "-m", "grader.cli.main", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _new_version_stored(db: Path, prompt_version: str = "2") -> int:
    """Ok judgments stored under the new prompt (the seeded old ones are version 1)."""
    conn = sqlite3.connect(db, timeout=30)
    try:
        rows = conn.execute("SELECT judgment FROM judgment_rows WHERE status = 'ok'").fetchall()
    finally:
        conn.close()
    return sum(1 for (text,) in rows if f'"version":"{prompt_version}"' in text)


@pytest.mark.slow
def test_ctrl_c_on_a_live_regrade_exits_130_with_what_is_stored(
    fake_server: FakeServer, tmp_path: Path
) -> None:
    db = tmp_path / "s.db"
    seed_store(db, PAIRS)
    prompt = Path(new_prompt(tmp_path).source)
    fake_server.latency_ms = 50.0  # 60 pairs at concurrency 2: ~1.5 s of requests
    proc = _start(fake_server, db, prompt)
    deadline = time.monotonic() + 60
    while fake_server.counts["requests"] < 4:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the regrade never sent a request"
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert "batch" not in err  # no batch was submitted: none is claimed
    found = re.search(r"interrupted: (\d+) of (\d+) pairs done and stored; to resume, rerun", err)
    assert found is not None, err
    done, total = int(found[1]), int(found[2])
    assert total == PAIRS
    assert done == _new_version_stored(db)
    assert 4 <= done < PAIRS
    sent = fake_server.counts["requests"]
    assert sent == done  # a clean stop stored every answer it paid for

    rerun = _start(fake_server, db, prompt)
    _, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err
    assert fake_server.counts["requests"] == PAIRS  # the rest only: nothing paid twice
    assert _new_version_stored(db) == PAIRS


@pytest.mark.slow
def test_ctrl_c_during_start_up_prints_no_traceback(
    fake_server: FakeServer, tmp_path: Path
) -> None:
    db = tmp_path / "s.db"
    seed_store(db, 6)
    prompt = Path(new_prompt(tmp_path).source)
    holder = LockHolder(db)  # the regrade waits for the store while it starts
    try:
        proc = _start(fake_server, db, prompt, RELGRADE_STORE_BUSY_TIMEOUT="0.1s")
        assert proc.stderr is not None
        line = proc.stderr.readline()  # the sign it started: it says it waits for the store
        assert "store busy" in line, line
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        holder.release()
    assert proc.returncode == 130, line + err
    assert "Traceback" not in err
    assert "interrupted" in err
    assert fake_server.counts["requests"] == 0


@pytest.mark.slow
def test_ctrl_c_while_the_command_loads_prints_no_traceback(
    fake_server: FakeServer, tmp_path: Path
) -> None:
    db = tmp_path / "s.db"
    seed_store(db, 6)
    prompt = Path(new_prompt(tmp_path).source)
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-interrupt", "PYTHONPATH": str(ROOT)}
    args = ["regrade", "--store", str(db), "--prompt", str(prompt), "--model", "fake-model"]
    args += ["--base-url", fake_server.base_url, "--quiet"]
    # -X importtime reports each module loaded: the sign that `main` is loading the command's
    # modules (pydantic is not among those `relgrade` itself loads before `main` runs).
    proc = subprocess.Popen(
        [sys.executable, "-X", "importtime", "-m", "grader.cli.main", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    seen = ""
    while "pydantic" not in seen:
        line = proc.stderr.readline()
        assert line, "the command ended before loading pydantic"
        seen = line
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    assert "relgrade regrade: interrupted" in err
    assert fake_server.counts["requests"] == 0
