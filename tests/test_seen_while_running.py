"""Seen while it runs, and the library never prints (issue 36 section 8, issue 35 section 1).

Where stderr is no terminal (a log), `relgrade grade` writes a plain progress line now and then
(`RELGRADE_PROGRESS_EVERY` seconds; 30 by default): done, cached, failed, rate, ETA. Without
ipywidgets the notebook bar is tqdm's text bar, with no TqdmWarning. `rg.grade` against a server
that refuses `json_schema` and lists another model prints nothing on stderr: both notices are
RelgradeWarnings.
"""

from __future__ import annotations

import importlib.util
import io
import re
import warnings
from pathlib import Path

import pytest

import relgrade as rg
from grader.cli.main import main
from grader.display import progress as progress_line
from grader.display.progress import GradingProgress
from grader.errors import RelgradeWarning
from grader.grading.events import ProgressEvent
from tests.fakeserver import FakeServer
from tests.grade_data import write_grade_files

LINE = re.compile(
    r"^grading (\d+)/(\d+) · cached (\d+) · failed (\d+) · ([\d.]+|-)/s · ETA ([\d:-]+) · "
    r"\$(\?|[\d.]+\+?\??)$"
)


def _event(done: int, total: int = 10) -> ProgressEvent:
    return ProgressEvent(done=done, total=total, cached=0, failed=0, spend=0.0)


def test_a_log_gets_a_plain_line_every_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELGRADE_PROGRESS_EVERY", "0")
    log = io.StringIO()  # not a terminal
    with GradingProgress(file=log, enabled=None) as bar:
        for done in range(4):
            bar(_event(done))
    lines = log.getvalue().splitlines()
    assert len(lines) == 3  # every event after the first, the interval being 0
    assert [LINE.match(line) is not None for line in lines] == [True] * 3, lines
    assert lines[-1].startswith("grading 3/10 · cached 0 · failed 0")


def test_no_line_before_the_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELGRADE_PROGRESS_EVERY", "3600")
    log = io.StringIO()
    with GradingProgress(file=log, enabled=None) as bar:
        for done in range(4):
            bar(_event(done))
    assert log.getvalue() == ""


def test_the_command_writes_progress_lines_to_a_log(
    fake_server: FakeServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("RELGRADE_PROGRESS_EVERY", "0")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    fake_server.latency_ms = 20.0
    files = write_grade_files(tmp_path, n_queries=2, depth=5)
    args = files.args("--base-url", fake_server.base_url, "--store", tmp_path / "s.db")
    assert main([*args, "--model", "fake-model", "--concurrency", "2"]) == 0
    err = capsys.readouterr().err  # pytest's capture is no terminal
    lines = [line for line in err.splitlines() if line.startswith("grading ")]
    assert lines and all(LINE.match(line) for line in lines), err
    assert lines[-1].startswith(f"grading {files.n_pairs}/{files.n_pairs}")


def test_without_ipywidgets_the_bar_is_tqdms_text_one_quietly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("tqdm")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "ipywidgets" else real(name, *a),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bar = progress_line._tqdm(10, io.StringIO())
    from tqdm.std import tqdm

    assert type(bar) is tqdm
    bar.close()


def test_the_api_warns_what_the_command_prints(
    fake_server: FakeServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    fake_server.reject_formats = {"json_schema"}
    files = write_grade_files(tmp_path, n_queries=1, depth=2)
    with pytest.warns(RelgradeWarning) as caught:
        frame = rg.grade(
            runs=files.run,
            queries=files.queries,
            docs=files.docs,
            base_url=fake_server.base_url,
            model="not-listed",
            store=tmp_path / "s.db",
            progress=False,
        )
    assert (frame.status == "ok").all()
    said = [str(w.message) for w in caught]
    assert any("output mode json_schema -> json_object_schema" in s for s in said), said
    assert any("lists the models fake-model" in s for s in said), said
    assert capsys.readouterr().err == ""
