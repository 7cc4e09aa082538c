"""Ctrl-C during a grading run, sent to a child process running it (tests/ctrl_c_child.py),
once two judge calls are in flight there: it takes no new work, lets the calls in flight finish
(stored), or abandons them after the grace period (nothing stored)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

MODULE_ROOT = Path(__file__).resolve().parents[1]


def _interrupted_child(mode: str, store: Path, n_pairs: int) -> dict[str, Any]:
    """Run the child, Ctrl-C it once two calls are in flight, and return its report."""
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.ctrl_c_child", mode, str(store), str(n_pairs)],
        cwd=MODULE_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # a shell's job control may start children with SIGINT ignored: restore the default
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        assert child.stdout is not None
        lines = []
        for line in child.stdout:
            lines.append(line.strip())
            if line.strip() == "in flight":
                break
        assert lines[-1:] == ["in flight"], (lines, child.stderr and child.stderr.read())
        child.send_signal(signal.SIGINT)
        if mode == "finish":
            child.send_signal(signal.SIGUSR1)  # handled after SIGINT: the held calls answer
        out, err = child.communicate(timeout=600)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, err
    report: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    report["lines"] = lines + out.strip().splitlines()[:-1]
    return report


@pytest.mark.slow
def test_ctrl_c_finishes_calls_in_flight_and_takes_no_new_work(tmp_path: Path) -> None:
    report = _interrupted_child("finish", tmp_path / "s.db", 20)
    assert report["interrupted"]
    assert len(report["calls"]) == 2  # the two in flight; nothing new after Ctrl-C
    assert [line for line in report["lines"] if line.startswith("call ")] == [
        f"call {doc}" for doc in report["calls"]
    ]
    assert report["graded"] == 2 and report["pending"] == 18
    assert report["stored"] == 2  # the calls in flight finished and were stored


@pytest.mark.slow
def test_ctrl_c_abandons_slow_calls_after_the_grace_period(tmp_path: Path) -> None:
    report = _interrupted_child("abandon", tmp_path / "s.db", 5)
    assert report["interrupted"] and report["pending"] == 5
    assert len(report["calls"]) == 2
    assert report["stored"] == 0  # abandoned calls store nothing
