"""`-` means stdin for every input, through the one opener: `grade --run -` (the lexical judge
writes the same qrels as from the file), `--skip-judged -`, `--queries -`, `--docs -`,
`evaluate -` for QRELS, `evaluate --fill -`; and at most one input per command may be `-`.
Each command is a real process with a real pipe on its stdin."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.grade_data import GradeFiles, write_grade_files

ROOT = Path(__file__).resolve().parents[1]


def relgrade(
    args: list[str | Path], stdin: Path | None, cwd: Path
) -> subprocess.CompletedProcess[str]:
    """`relgrade ARGS` in a new process, the text of `stdin` (or nothing) piped to it."""
    return subprocess.run(
        [sys.executable, "-m", "grader.cli.main", *map(str, args)],
        input=stdin.read_text() if stdin else "",
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.fixture
def files(tmp_path: Path) -> GradeFiles:
    return write_grade_files(tmp_path, n_queries=4, depth=5)


def _grade(files: GradeFiles, tmp_path: Path, name: str, *extra: str | Path) -> list[str | Path]:
    base: list[str | Path] = ["grade", "--judge", "lexical", "--quiet"]
    given: dict[str | Path, str | Path] = dict(zip(extra[::2], extra[1::2], strict=True))
    inputs: list[tuple[str, str | Path]] = [
        ("--queries", files.queries),
        ("--docs", files.docs),
        ("--run", files.run),
    ]
    for flag, value in inputs:
        base += [flag, given.pop(flag, value)]
    for other, value in given.items():
        base += [other, value]
    return [*base, "--store", tmp_path / f"{name}.db", "--qrels-out", tmp_path / f"{name}.qrels"]


@pytest.mark.slow
def test_grade_reads_each_input_from_stdin_as_from_its_file(
    files: GradeFiles, tmp_path: Path
) -> None:
    done = relgrade(_grade(files, tmp_path, "file"), None, tmp_path)
    assert done.returncode == 0, done.stderr
    expected = (tmp_path / "file.qrels").read_text()
    assert expected.count("\n") == files.n_pairs
    for flag, source in (
        ("--run", files.run),
        ("--queries", files.queries),
        ("--docs", files.docs),
    ):
        name = flag.strip("-")
        done = relgrade(_grade(files, tmp_path, name, flag, "-"), source, tmp_path)
        assert done.returncode == 0, done.stderr
        assert (tmp_path / f"{name}.qrels").read_text() == expected, flag
    people = tmp_path / "people.qrels"
    people.write_text("".join(expected.splitlines(keepends=True)[:7]))
    done = relgrade(_grade(files, tmp_path, "holes", "--skip-judged", "-"), people, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "judged by people 7, holes 13" in done.stderr
    holes = (tmp_path / "holes.qrels").read_text().splitlines(keepends=True)
    assert sorted(holes) == sorted(expected.splitlines(keepends=True)[7:])


def test_evaluate_reads_qrels_and_fill_from_stdin(files: GradeFiles, tmp_path: Path) -> None:
    done = relgrade(_grade(files, tmp_path, "llm"), None, tmp_path)
    assert done.returncode == 0, done.stderr
    llm = tmp_path / "llm.qrels"
    people = tmp_path / "people.qrels"
    people.write_text("".join(llm.read_text().splitlines(keepends=True)[:9]))
    as_file = relgrade(["evaluate", llm, files.run, "--format", "json"], None, tmp_path)
    as_stdin = relgrade(["evaluate", "-", files.run, "--format", "json"], llm, tmp_path)
    assert as_file.returncode == as_stdin.returncode == 0, as_stdin.stderr
    assert as_stdin.stdout == as_file.stdout
    fill: list[str | Path] = ["evaluate", people, files.run, "--format", "json", "--fill"]
    as_file = relgrade([*fill, llm], None, tmp_path)
    as_stdin = relgrade([*fill, "-"], llm, tmp_path)
    assert as_file.returncode == as_stdin.returncode == 0, as_stdin.stderr
    assert as_stdin.stdout == as_file.stdout
    run_stdin = relgrade(
        ["evaluate", people, "-", "--format", "json", "--fill", llm], files.run, tmp_path
    )
    assert run_stdin.returncode == 0, run_stdin.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["evaluate", "-", "-"],
        ["evaluate", "{run}", "-", "--fill", "-"],
        ["grade", "--judge", "lexical", "--queries", "-", "--docs", "-", "--run", "{run}"],
        [
            "grade",
            "--judge",
            "lexical",
            "--queries",
            "{q}",
            "--docs",
            "{d}",
            "--run",
            "-",
            "--skip-judged",
            "-",
        ],
    ],
)
def test_two_inputs_on_stdin_are_refused(
    files: GradeFiles, tmp_path: Path, args: list[str]
) -> None:
    names = {"run": files.run, "q": files.queries, "d": files.docs}
    done = relgrade([a.format(**names) for a in args], files.run, tmp_path)
    assert done.returncode == 2, done.stderr
    assert "stdin (-) is given twice" in done.stderr
    assert "Traceback" not in done.stderr
