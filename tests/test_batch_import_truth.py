"""`relgrade batch import` never calls nothing a success, and its summary tells what this import
stored, what was stored already and what is still missing in the store; `batch export` does not
export again what waits in an export not imported yet (issue 25, point 6)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from grader.batch.adapter import JobJudges
from grader.batch.files.import_files import Importer
from grader.cli.batch_files import import_text
from grader.cli.main import main
from grader.judges.llm.judge import LLMJudge
from grader.prompts import PromptSpec
from grader.store.store import Store
from tests.fakeserver import FakeServer
from tests.grade_data import GradeFiles, write_grade_files
from tests.helpers.batch_cli import MODEL, cli_export, cli_import, custom_ids, http_engine
from tests.helpers.judgments import stored_judgments


@pytest.fixture
def files(tmp_path: Path) -> GradeFiles:
    return write_grade_files(tmp_path, n_queries=4, depth=5)  # 20 pairs, 20 texts


def _grades(db: Path) -> dict[str, int]:
    with Store(db) as store:
        return {j.key: j.grade for j in stored_judgments(store, status="ok") if j.grade is not None}


@pytest.mark.parametrize("content", ["hello\nworld\n", '{"custom_id": "relgrade:x'])
def test_results_with_no_usable_line_exit_2_with_the_reason(
    files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str
) -> None:
    db = tmp_path / "n.db"
    cli_export(files, db, tmp_path / "out")
    bad = tmp_path / "bad.results.jsonl"
    bad.write_text(content)
    capsys.readouterr()
    assert cli_import(db, bad) == 2
    err = capsys.readouterr().err
    assert f"{bad}: no usable results line: " in err and "nothing was imported" in err
    if content.endswith("\n"):
        assert f"2 lines are not JSON ({bad}:1, {bad}:2)" in err
    else:
        assert f"a last line is cut short ({bad}:1)" in err
    with Store(db) as store:
        assert store.count() == 0


def test_an_import_racing_another_counts_only_what_it_stored(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path
) -> None:
    """Import A decides its answers, then import B of conflicting results for half of the
    same requests writes first: the store keeps B's (the first ok answer is final), and A
    says it stored only the other half, the rest being stored already."""
    db = tmp_path / "race.db"
    requests = cli_export(files, db, tmp_path / "out")
    fake_server.grade_fn = lambda body: 3
    results_a = http_engine(fake_server, requests, tmp_path / "res-a")
    fake_server.grade_fn = lambda body: 0
    results_b = http_engine(fake_server, requests, tmp_path / "res-b")
    lines_b = results_b[0].read_text().splitlines(keepends=True)
    half = tmp_path / "half-b.jsonl"
    half.write_text("".join(lines_b[:8]))

    def make_judge(model: str, prompt: PromptSpec) -> LLMJudge:
        return LLMJudge(model=model, prompt=prompt, base_url=fake_server.base_url)

    judge_for = JobJudges(make_judge).for_job
    raced: list[object] = []

    def import_b_now(_progress: object) -> None:  # A's lines are decided, not yet written
        if raced:
            return
        with Store(db) as other, Importer(other, judge_for) as importer_b:
            raced.append(importer_b.run([half]))

    with Store(db) as store, Importer(store, judge_for, progress=import_b_now) as importer:
        summary = importer.run(results_a)
        left = importer.unresolved(summary)
    assert raced, "import B never ran"
    assert (summary.lines, summary.ok, summary.already, left) == (20, 12, 8, 0)
    assert "12 ok, 0 failed, 0 missing (no results line) stored by this import; 8 already " in (
        import_text(summary)
    )
    grades = _grades(db)
    assert sorted(grades.values()) == [0] * 8 + [3] * 12


def test_reimporting_an_old_file_after_its_gaps_were_filled_exits_0(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "gaps.db"
    requests = cli_export(files, db, tmp_path / "out")
    assert len(requests) == 1
    results = http_engine(fake_server, requests, tmp_path / "res", stop_after=17)  # 3 missing
    capsys.readouterr()
    assert cli_import(db, *results) == 1
    assert "3 requests have no grade" in capsys.readouterr().err
    # The gaps are filled elsewhere: graded live with the same prompt and model (same keys).
    url = ["--base-url", fake_server.base_url]
    assert main(files.args("--store", str(db), *url, *MODEL, "--quiet")) == 0
    assert cli_import(db, *results) == 0
    err = capsys.readouterr().err
    assert "0 ok, 0 failed, 0 missing (no results line) stored by this import; 17 already" in err
    assert "; 0 requests of these request files still without an ok answer in the store" in err
    assert "have no grade" not in err
    with sqlite3.connect(db) as conn:
        outcomes = dict(conn.execute("SELECT outcome, COUNT(*) FROM export_lines GROUP BY 1"))
    conn.close()
    assert outcomes == {"ok": 20}


def _lines(requests: list[Path]) -> int:
    return sum(len(p.read_text().splitlines()) for p in requests)


@pytest.mark.slow
def test_a_second_export_leaves_out_what_waits_in_the_first_unless_asked(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "twice.db"
    first = cli_export(files, db, tmp_path / "a")
    first_id = custom_ids(first[0])[0].split(":")[1]
    capsys.readouterr()
    assert _lines(cli_export(files, db, tmp_path / "b")) == 0  # all 20 wait in the first
    err = capsys.readouterr().err
    assert f"20 pairs left out: their requests wait in export {first_id}" in err
    assert "--include-pending" in err

    # Half of the first export's results come back: those keys are stored, the rest of its
    # request file is marked missing (no longer waiting), so the next export asks for them.
    results = http_engine(fake_server, first, tmp_path / "res", stop_after=10)
    assert cli_import(db, *results) == 1
    capsys.readouterr()
    second = cli_export(files, db, tmp_path / "c")
    assert _lines(second) == 10
    assert "left out: their requests wait" not in capsys.readouterr().err
    second_id = custom_ids(second[0])[0].split(":")[1]

    assert _lines(cli_export(files, db, tmp_path / "d")) == 0
    err = capsys.readouterr().err
    assert f"10 pairs left out: their requests wait in export {second_id}" in err
    forced = cli_export(files, db, tmp_path / "e", "--include-pending")
    err = capsys.readouterr().err
    assert _lines(forced) == 10
    assert "left out: their requests wait" not in err
    assert f"warning: 10 of these requests are also in export {second_id}" in err
