"""Ctrl-C during `relgrade.grade` in a running event loop (a notebook's stop button): the call
raises KeyboardInterrupt, every answer received is stored, and calling again finishes the rest
without paying twice. SIGINT goes to a child process the test starts, never to pytest."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import relgrade as rg
from grader.store.store import Store
from tests.fakeserver import FakeServer
from tests.grade_data import write_grade_files

CHILD = """
import asyncio, sys
import relgrade as rg

async def cell():  # as in Jupyter: a loop runs while the cell calls rg.grade
    return rg.grade(runs=sys.argv[1], queries=sys.argv[2], docs=sys.argv[3],
                    base_url=sys.argv[4], store=sys.argv[5], concurrency=2, progress=False)

try:
    asyncio.run(cell())
except KeyboardInterrupt as exc:
    print("INTERRUPTED:", exc, flush=True)
    sys.exit(130)
print("FINISHED", flush=True)
"""


def _wait(condition: object, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.05)
    return False


@pytest.mark.slow
def test_interrupt_raises_and_leaves_a_resumable_store(
    fake_server: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = write_grade_files(tmp_path, n_queries=4, depth=6)
    store = tmp_path / "s.db"
    fake_server.latency_ms = 400.0
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-interrupt", "PYTHONPATH": os.getcwd()}
    args = [files.run, files.queries, files.docs, fake_server.base_url, store]
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, *map(str, args)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert _wait(lambda: fake_server.counts["requests"] >= 2, 120), "the child never graded"
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 130, err
    assert "INTERRUPTED: interrupted:" in out and "call again" in out
    sent = fake_server.counts["requests"]
    assert sent < files.n_pairs  # it stopped taking new work
    with Store(store) as db:
        stored = db.count()
    assert 0 < stored <= sent  # every answer received is stored (in flight ones finished)
    fake_server.latency_ms = 0.0
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-interrupt")
    frame = rg.grade(
        runs=files.run,
        queries=files.queries,
        docs=files.docs,
        base_url=fake_server.base_url,
        store=store,
        progress=False,
    )
    assert len(frame) == files.n_pairs and (frame.status == "ok").all()
    assert fake_server.counts["requests"] - sent == files.n_pairs - stored  # none paid twice


CHILD_TWICE = """
import asyncio, gc, sys
import relgrade as rg

def call():
    return rg.grade(runs=sys.argv[1], queries=sys.argv[2], docs=sys.argv[3],
                    base_url=sys.argv[4], store=sys.argv[5], concurrency=2, progress=False)

async def cell():
    try:
        call()
    except KeyboardInterrupt:
        print("INTERRUPTED", flush=True)
    sys.stdin.readline()  # the test says when the server is fast again
    gc.collect()  # what was left of the first call goes now, in the next call's time
    frame = call()
    gc.collect()
    await asyncio.sleep(0.2)
    print("FINISHED", len(frame), flush=True)

asyncio.run(cell())
"""


@pytest.mark.slow
def test_a_call_after_an_interrupt_says_nothing_of_the_old_loop(
    fake_server: FakeServer, tmp_path: Path
) -> None:
    # The stop button, then the next call: the first call's HTTP client was closed on its own
    # loop, so nothing is left to fail on a closed one ("Event loop is closed").
    files = write_grade_files(tmp_path, n_queries=4, depth=6)
    fake_server.latency_ms = 400.0
    env = {**os.environ, "OPENAI_API_KEY": "sk-test-interrupt", "PYTHONPATH": os.getcwd()}
    args = [files.run, files.queries, files.docs, fake_server.base_url, tmp_path / "s.db"]
    child = subprocess.Popen(
        [sys.executable, "-W", "default", "-c", CHILD_TWICE, *map(str, args)],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert _wait(lambda: fake_server.counts["requests"] >= 2, 120), "the child never graded"
        child.send_signal(signal.SIGINT)
        assert child.stdout is not None and child.stdout.readline() == "INTERRUPTED\n"
        fake_server.latency_ms = 0.0
        out, err = child.communicate("go\n", timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err
    assert f"FINISHED {files.n_pairs}" in out
    assert "never retrieved" not in err and "Event loop is closed" not in err, err
