"""`relgrade evaluate` starts quick (issue 12, goal 5): one OpenBLAS thread, no cycle collector.

numpy's OpenBLAS starts a thread per core when numpy is imported; evaluate does no linear
algebra, so the CLI asks for one thread (OPENBLAS_NUM_THREADS) before numpy loads, unless the
user set a number, and never in a process that imported numpy already (a library caller); the
variable is gone again when `main` returns. The cyclic garbage collector is off while evaluate
runs (its collections cost more than the few objects it makes) and back on when `main` returns,
whatever happened.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.cli import evaluate
from grader.cli.main import main

ROOT = Path(__file__).resolve().parents[1]


def _threads(argv: list[str], *, preset: str | None, numpy_first: bool = False) -> tuple[str, str]:
    """OPENBLAS_NUM_THREADS while `main(argv)` runs its command and after it returned, in a
    fresh interpreter."""
    code = (
        "import os, sys\n"
        + ("import numpy\n" if numpy_first else "")
        + "import grader.cli.main as cli\n"
        + "real = cli._run\n"
        + "def spy(command, words):\n"
        + "    print(os.environ.get('OPENBLAS_NUM_THREADS', 'unset'))\n"
        + "    return real(command, words)\n"
        + "cli._run = spy\n"
        + "try:\n"
        + f"    cli.main({argv!r})\n"
        + "except SystemExit:\n"
        + "    pass\n"
        + "print(os.environ.get('OPENBLAS_NUM_THREADS', 'unset'))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if preset is not None:
        env["OPENBLAS_NUM_THREADS"] = preset
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    lines = done.stdout.strip().splitlines()
    return lines[0], lines[-1]


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    (tmp_path / "qrels.txt").write_text("q1 0 a 2\nq1 0 b 0\n")
    (tmp_path / "run.txt").write_text("q1 Q0 a 1 2.0 t\nq1 Q0 b 2 1.0 t\n")
    return [str(tmp_path / "qrels.txt"), str(tmp_path / "run.txt"), "--format", "json"]


def test_evaluate_asks_for_one_blas_thread_and_leaves_none_behind(files: list[str]) -> None:
    assert _threads(["evaluate", *files], preset=None) == ("1", "unset")


@pytest.mark.slow
def test_a_number_the_user_set_is_kept(files: list[str]) -> None:
    assert _threads(["evaluate", *files], preset="3") == ("3", "3")


@pytest.mark.slow
def test_not_when_numpy_is_loaded_already_nor_for_other_commands(files: list[str]) -> None:
    assert _threads(["evaluate", *files], preset=None, numpy_first=True) == ("unset", "unset")
    assert _threads(["prompts", "list"], preset=None) == ("unset", "unset")


@pytest.mark.parametrize("fails", [False, True])
def test_evaluate_runs_without_the_cycle_collector_and_turns_it_back_on(
    files: list[str], monkeypatch: pytest.MonkeyPatch, fails: bool
) -> None:
    seen = []
    real = evaluate.run

    def spy(args: object) -> int:
        seen.append(gc.isenabled())
        if fails:
            raise KeyboardInterrupt
        return real(args)  # type: ignore[arg-type]

    monkeypatch.setattr(evaluate, "run", spy)
    assert gc.isenabled()
    assert main(["evaluate", *files]) == (130 if fails else 0)
    assert seen == [False] and gc.isenabled()
    gc.disable()  # a caller that had it off keeps it off
    try:
        main(["evaluate", *files])
        assert not gc.isenabled()
    finally:
        gc.enable()
