"""A `relgrade regrade --batch` process killed (SIGKILL) while it waits for its batch: a later
`relgrade batch collect` process finishes the work, and nothing is submitted twice. relgrade runs
as subprocesses; the fake server (chat and Batch API) runs here."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.batch_helpers import new_prompt, seed_store
from tests.fake_batch import BatchPlan, FakeBatchAPI
from tests.fakeserver import FakeServer

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def _phases(store: Path) -> list[str]:
    conn = sqlite3.connect(store, timeout=30)
    try:
        return [p for (p,) in conn.execute("SELECT phase FROM batch_jobs ORDER BY job_id")]
    except sqlite3.OperationalError:
        return []
    finally:
        conn.close()


def _relgrade(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RELGRADE_PRICES"):
        env.pop(name, None)
    return subprocess.Popen(
        [sys.executable, "-m", "grader.cli.main", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_killed_while_waiting_then_batch_collect_finishes(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    seed_store(db, 6)
    prompt = new_prompt(tmp_path)
    with FakeServer() as server:
        api = FakeBatchAPI(server)
        api.plan(BatchPlan(polls_in_progress=10_000))  # "hours": never done while it waits
        proc = _relgrade(
            "regrade", "--store", str(db), "--prompt", prompt.source, "--model", "fake-model",
            "--base-url", server.base_url, "--batch", "--poll-interval", "0.05",
            "--poll-max", "0.05",
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while not (_phases(db) == ["submitted"] and api.counts["retrieve"] >= 2):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the batch was never submitted"
            time.sleep(0.05)
        proc.kill()
        proc.wait()
        assert _phases(db) == ["submitted"]
        (batch_id,) = api.batches
        api._batch_plans[batch_id].polls_in_progress = 0  # the server finishes meanwhile

        collect = _relgrade(
            "batch", "collect", "--store", str(db), "--base-url", server.base_url,
            "--poll-interval", "0",
        )  # fmt: skip
        _, err = collect.communicate(timeout=120)
        assert collect.returncode == 0, err
        assert "6 graded from the batch" in err
        assert _phases(db) == ["collected"]
        assert api.counts["create"] == 1 and api.counts["upload"] == 1
        assert server.counts["requests"] == 0
        conn = sqlite3.connect(db)
        try:
            versions = conn.execute(
                "SELECT prompt_version, COUNT(*) FROM judgment_rows WHERE status = 'ok' "
                "GROUP BY prompt_version ORDER BY prompt_version"
            ).fetchall()
        finally:
            conn.close()
        assert versions == [("1", 6), ("2", 6)]
