"""Outputs never clobber inputs: an output path that is an input path, or two outputs on one
path (the same file through a symbolic link, a hard link or `..`), is exit 2 naming both flags,
before any request is sent and with every file left as it was; in every command that writes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from grader.cli.main import main
from tests.fakeserver import FakeServer
from tests.grade_data import GradeFiles, write_grade_files

HUMAN = "".join(f"q{q} 0 d{q * 4 + r} {(q + r) % 4}\n" for q in range(3) for r in (0, 2))


@pytest.fixture
def files(tmp_path: Path) -> GradeFiles:
    return write_grade_files(tmp_path)


@pytest.fixture
def human(tmp_path: Path) -> Path:
    path = tmp_path / "human.qrels"
    path.write_text(HUMAN)
    return path


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def _refused(args: list[str], flags: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err
    assert all(flag in err for flag in flags), err
    assert "Traceback" not in err
    return err


@pytest.mark.usefixtures("llm_env")
@pytest.mark.parametrize(
    ("extra", "flags"),
    [
        (
            ["--skip-judged", "{human}", "--merged-out", "{human}"],
            ("--merged-out", "--skip-judged"),
        ),
        (["--merged-out", "{x}", "--out", "{x}"], ("--out", "--merged-out")),
        (["--merged-out", "{x}", "--qrels-out", "{x}"], ("--qrels-out", "--merged-out")),
        (["--out", "{x}", "--qrels-out", "{link}"], ("--out", "--qrels-out")),
        (["--qrels-out", "{run}"], ("--qrels-out", "--run")),
        (["--out", "{docs_dotdot}"], ("--out", "--docs")),
        (["--out", "{hard_queries}"], ("--out", "--queries")),
        (["--out", "{store}"], ("--out", "--store")),
    ],
)
def test_grade_refuses_an_output_on_an_input_before_any_request(
    fake_server: FakeServer,
    files: GradeFiles,
    human: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    flags: tuple[str, str],
) -> None:
    x = tmp_path / "x.out"
    (tmp_path / "link").symlink_to(x)  # dangling until x is written: still the same file
    (tmp_path / "sub").mkdir()
    hard = tmp_path / "hard.tsv"
    os.link(files.queries, hard)
    names = {
        "human": human,
        "x": x,
        "link": tmp_path / "link",
        "run": files.run,
        "docs_dotdot": tmp_path / "sub" / ".." / files.docs.name,
        "hard_queries": hard,
        "store": tmp_path / "s.db",
    }
    if "--skip-judged" not in extra:
        extra = ["--skip-judged", "{human}", *extra]
    args = files.args(
        "--base-url",
        fake_server.base_url,
        "--store",
        tmp_path / "s.db",
        "--quiet",
        *(a.format(**names) for a in extra),
    )
    before = _snapshot(tmp_path)
    _refused(args, flags, capsys)
    assert fake_server.counts["requests"] == 0
    assert _snapshot(tmp_path) == before  # people's qrels, the run, the docs: all as they were


def test_grade_with_distinct_outputs_still_writes_them(
    files: GradeFiles, human: Path, tmp_path: Path
) -> None:
    merged, out = tmp_path / "merged.qrels", tmp_path / "j.jsonl"
    args = files.args(
        "--judge",
        "lexical",
        "--store",
        tmp_path / "s.db",
        "--quiet",
        "--skip-judged",
        human,
        "--merged-out",
        merged,
        "--out",
        out,
    )
    assert main(args) == 0
    assert human.read_text() == HUMAN
    assert merged.read_text().count("\n") == files.n_pairs


def test_regrade_sample_calibrate_and_batch_refuse_clashes(
    files: GradeFiles,
    human: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store, judgments = tmp_path / "s.db", tmp_path / "j.jsonl"
    grade = files.args("--judge", "lexical", "--store", store, "--quiet", "--out", judgments)
    assert main(grade) == 0
    capsys.readouterr()
    before = _snapshot(tmp_path)
    run = str(files.run)
    s = str(store)
    cases: list[tuple[list[str], tuple[str, str]]] = [
        (
            ["regrade", "--store", s, "--judge", "lexical", "--run", run, "--out", run],
            ("--out", "--run"),
        ),
        (
            ["regrade", "--store", s, "--judge", "lexical", "--out", "r", "--qrels-out", "r"],
            ("--out", "--qrels-out"),
        ),
        (
            ["sample", "--judgments", str(judgments), "--n", "2", "--out", str(judgments)],
            ("--out", "--judgments"),
        ),
        (
            [
                "sample",
                "--judgments",
                str(judgments),
                "--n",
                "2",
                "--out",
                "a.csv",
                "--labelstudio",
                "a.csv",
            ],
            ("--out", "--labelstudio"),
        ),
        (
            ["calibrate", "--llm", str(judgments), "--human", str(human), "--report", str(human)],
            ("--report", "--human"),
        ),
        (
            [
                "batch",
                "export",
                "--store",
                s,
                "--run",
                run,
                "--queries",
                str(files.queries),
                "--docs",
                str(files.docs),
                "--out-dir",
                str(tmp_path / "ex"),
                "--skip-judged",
                s,
            ],
            ("--store", "--skip-judged"),
        ),
        (["batch", "import", "--store", str(judgments), str(judgments)], ("--store", "RESULTS")),
    ]
    monkeypatch.chdir(tmp_path)
    for args, flags in cases:
        _refused(args, flags, capsys)
    assert _snapshot(tmp_path) == before
