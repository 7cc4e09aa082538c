"""A run killed while writing its outputs: the next run removes the temp file it left and says
which output was not rewritten. relgrade runs as a real subprocess, killed with SIGKILL while the
qrels temp file exists (after the judgments JSONL was renamed into place)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.io.files import PAUSE_ENV, OutputSet, atomic_write, host_tag, remove_stale_temp_files
from grader.io.judgments import read_judgments
from grader.io.trec import read_qrels
from tests.grade_data import GradeFiles, write_grade_files

ROOT = Path(__file__).resolve().parents[1]


def grade(
    files: GradeFiles, folder: Path, depth: int, pause: str | None = None
) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(PAUSE_ENV, None)
    if pause:
        env[PAUSE_ENV] = pause
    args = files.args(
        "--judge", "lexical", "--store", folder / "s.db", "--depth", str(depth), "--quiet",
        "--out", folder / "j.jsonl", "--qrels-out", folder / "llm.qrels",
    )  # fmt: skip
    return subprocess.Popen(
        [sys.executable, "-m", "grader.cli.main", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def temp_files(folder: Path) -> list[Path]:
    return sorted(folder.glob(".*.relgrade-*.tmp"))


@pytest.mark.slow
def test_kill_between_outputs_is_cleaned_and_reported_by_the_next_run(tmp_path: Path) -> None:
    files = write_grade_files(tmp_path, n_queries=3, depth=4)
    first = grade(files, tmp_path, depth=2)
    assert first.wait(timeout=120) == 0, first.communicate()
    assert len(read_qrels(tmp_path / "llm.qrels")) == 6  # an earlier run's qrels

    killed = grade(files, tmp_path, depth=4, pause="llm.qrels:60")
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(".llm.qrels.relgrade-*.tmp")):  # not the JSONL's, written first
        assert killed.poll() is None, killed.communicate()
        assert time.monotonic() < deadline, "the qrels temp file never appeared"
        time.sleep(0.02)
    killed.kill()
    killed.wait()
    left = temp_files(tmp_path)
    assert [p.name.split(".relgrade-")[0] for p in left] == [".llm.qrels"]
    assert f"-{killed.pid}-" in left[0].name
    assert len(read_judgments(tmp_path / "j.jsonl")) == 12  # the new JSONL is in place ...
    assert len(read_qrels(tmp_path / "llm.qrels")) == 6  # ... beside the old qrels

    rerun = grade(files, tmp_path, depth=4)
    _, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err
    assert f"removed {left[0]}: a temp file left by a run killed while writing" in err
    assert f"warning: a run (pid {killed.pid}, started " in err
    assert f"rewritten {tmp_path / 'j.jsonl'}; not rewritten {tmp_path / 'llm.qrels'}" in err
    assert temp_files(tmp_path) == []
    assert not OutputSet([tmp_path / "j.jsonl"]).marker.exists()
    judged = {(j.query_id, j.doc_id): j.grade for j in read_judgments(tmp_path / "j.jsonl")}
    qrels = read_qrels(tmp_path / "llm.qrels")
    assert len(qrels) == 12
    assert {(q, d): g for q, d, g in qrels.itertuples(index=False)} == judged

    again = grade(files, tmp_path, depth=4)
    _, err = again.communicate(timeout=120)
    assert again.returncode == 0 and "removed" not in err and "warning" not in err


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_only_our_temp_files_of_gone_writers_are_stale(tmp_path: Path) -> None:
    target = tmp_path / "out.qrels"
    host = host_tag()
    dead = tmp_path / f".out.qrels.relgrade-{host}-{dead_pid()}-abc123.tmp"
    live = tmp_path / f".out.qrels.relgrade-{host}-{os.getppid()}-abc123.tmp"
    mine = tmp_path / f".out.qrels.relgrade-{host}-{os.getpid()}-abc123.tmp"
    elsewhere = tmp_path / f".out.qrels.relgrade-otherhost-{dead_pid()}-abc123.tmp"
    old_elsewhere = tmp_path / ".out.qrels.relgrade-otherhost-1-zz9.tmp"
    not_ours = [tmp_path / ".out.qrels.abc123.tmp", tmp_path / ".out.qrels.tmp"]
    other_target = tmp_path / f".other.relgrade-{host}-{dead_pid()}-abc123.tmp"
    day_ago = time.time() - 25 * 3600
    for p in (dead, live, mine, elsewhere, old_elsewhere, other_target, *not_ours):
        p.write_text("half a file")
    os.utime(old_elsewhere, (day_ago, day_ago))
    assert remove_stale_temp_files(target) == sorted([dead, old_elsewhere])
    assert all(p.exists() for p in (live, mine, elsewhere, other_target, *not_ours))

    dead.write_text("half a file")
    old_elsewhere.write_text("half a file")
    os.utime(old_elsewhere, (day_ago, day_ago))
    with atomic_write(target) as fh:  # a write removes the stale ones of its own target
        fh.write("q1 0 d1 1\n")
    assert not dead.exists() and not old_elsewhere.exists()
    assert all(p.exists() for p in (live, mine, elsewhere, other_target, *not_ours))
    assert target.read_text() == "q1 0 d1 1\n"


def test_output_set_marker_says_what_a_dead_run_left(tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.qrels"
    outputs = OutputSet([a, b])
    outputs.begin()
    outputs.done(a)
    assert outputs.previous() is None  # this process is still writing them
    text = outputs.marker.read_text().replace(f'"pid": {os.getpid()}', f'"pid": {dead_pid()}')
    outputs.marker.write_text(text)
    left = OutputSet([a, b]).previous()
    assert left is not None
    assert left.written == (a,) and left.not_written == (b,)
    outputs.finish()
    assert OutputSet([a, b]).previous() is None
