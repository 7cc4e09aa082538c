"""`grade --dry-run` prints its estimate first; the pairs it would send follow only with
`--verbose` (a terminal showing both streams sees the estimate before thousands of pairs)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.grade_data import write_grade_files


def _dry_run(tmp_path: Path, *extra: str) -> list[str]:
    """The lines of `grade --dry-run`, stdout and stderr in the order they were written."""
    files = write_grade_files(tmp_path)
    args = files.args("--judge", "lexical", "--store", str(tmp_path / "s.db"), "--dry-run")
    done = subprocess.run(
        [sys.executable, "-m", "grader.cli.main", *args, *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # one pipe: the order the two streams were written in
        text=True,
        check=True,
    )
    return done.stdout.splitlines()


@pytest.mark.slow
def test_the_estimate_comes_first_then_with_verbose_the_pairs(tmp_path: Path) -> None:
    lines = _dry_run(tmp_path, "--verbose")
    pairs = [i for i, line in enumerate(lines) if line.count("\t") == 2]
    assert len(pairs) == 12  # write_grade_files: 3 queries x 4 docs
    estimate = next(i for i, line in enumerate(lines) if line.startswith("dry run:"))
    sent = next(i for i, line in enumerate(lines) if line == "nothing was sent")
    assert estimate < sent < min(pairs)


@pytest.mark.slow
def test_without_verbose_only_the_estimate_and_how_to_list_the_pairs(tmp_path: Path) -> None:
    lines = _dry_run(tmp_path)
    assert not [line for line in lines if line.count("\t") == 2]
    assert any(line.startswith("dry run: 12 pairs") for line in lines)
    assert "--verbose lists the pairs that would be sent" in lines
