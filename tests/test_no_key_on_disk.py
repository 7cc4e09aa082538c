"""The API key is written nowhere: not in the store (and its WAL), outputs, call log or messages,
even when the server echoes it back in error messages."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakeserver import FakeServer, faults
from tests.grade_data import write_grade_files

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-test-SECRET-4f9c2e7d1b8a"


def run_grade(args: list[str], folder: Path, name: str) -> int:
    env = {**os.environ, "OPENAI_API_KEY": KEY, "PYTHONPATH": str(ROOT)}
    env.pop("OPENAI_BASE_URL", None)
    with (folder / f"{name}.stdout").open("w") as out, (folder / f"{name}.stderr").open("w") as err:
        return subprocess.run(
            [sys.executable, "-m", "grader.cli.main", *args],
            env=env,
            stdout=out,
            stderr=err,
            cwd=folder,
            timeout=120,
        ).returncode


@pytest.mark.slow
def test_key_is_nowhere_on_disk(fake_server: FakeServer, tmp_path: Path) -> None:
    files = write_grade_files(tmp_path)
    echo = f"invalid request from api key {KEY}"
    fake_server.enqueue(
        faults.server_error(500),
        faults.error(400, echo),
        faults.error(400, echo),
        faults.bad_grade(9),
        faults.bad_grade(9),
    )
    args = files.args(
        "--base-url",
        fake_server.base_url,
        "--api-key-env",  # a loopback server gets the key only when asked for
        "OPENAI_API_KEY",
        "--store",
        tmp_path / "s.db",
        "--out",
        tmp_path / "j.jsonl",
        "--qrels-out",
        tmp_path / "q.txt",
        "--max-attempts",
        "2",
        "--concurrency",
        "1",
    )
    assert run_grade(args, tmp_path, "first") == 1  # the echoing 400 left a failed pair
    # A 401 that echoes the key: the run stops, and the message still hides the key.
    fake_server.enqueue(faults.error(401, f"Incorrect API key provided: {KEY}"))
    assert run_grade(args, tmp_path, "second") == 1
    assert "answered 401" in (tmp_path / "second.stderr").read_text()

    # The key did reach the server (so the test means something)...
    assert any(KEY in h.get("authorization", "") for h in fake_server.headers)
    # ...and no file written anywhere in the folder holds it.
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "s.db" for p in written)
    assert (tmp_path / "j.jsonl").exists()
    for path in written:
        assert KEY.encode() not in path.read_bytes(), f"the API key leaked into {path.name}"
