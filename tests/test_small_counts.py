"""Small counts that must add up: a dry run's pairs (stored, sent, sharing a text), an unpriced
model's cost (unknown, never $0), and the exit code of a store that is not one."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.cost import spend_short
from grader.display.progress import GradingProgress
from grader.grading.events import ProgressEvent
from tests.fakeserver import FakeServer
from tests.grade_data import GradeFiles, write_grade_files


def _with_twins(folder: Path, twins: int) -> GradeFiles:
    """The grading files plus `twins` documents that repeat another's text under a new id,
    each ranked for the same query as its original."""
    files = write_grade_files(folder)
    docs = [json.loads(line) for line in files.docs.read_text().splitlines()]
    lines = files.run.read_text().splitlines()
    for i, line in enumerate(lines[:twins]):
        qid, _, did, _, _, tag = line.split()
        original = next(d for d in docs if d["doc_id"] == did)
        docs.append({**original, "doc_id": f"{did}-copy"})
        lines.append(f"{qid} Q0 {did}-copy {100 + i} 0 {tag}")
    files.docs.write_text("".join(json.dumps(d) + "\n" for d in docs))
    files.run.write_text("\n".join(lines) + "\n")
    return GradeFiles(files.queries, files.docs, files.run, files.n_pairs + twins)


def _dry_run_counts(err: str) -> tuple[int, int, int, int]:
    pairs = int(re.search(r"dry run: (\d+) pairs", err).group(1))  # type: ignore[union-attr]
    cached = int(re.search(r"(\d+) pairs need no request", err).group(1))  # type: ignore[union-attr]
    sent = int(re.search(r"would send (\d+) requests", err).group(1))  # type: ignore[union-attr]
    shared = re.search(r"(\d+) pairs share a text with another pair \(sent once\)", err)
    return pairs, cached, sent, int(shared.group(1)) if shared else 0


def test_dry_run_counts_add_up_when_pairs_share_a_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _with_twins(tmp_path, twins=3)
    args = files.args("--judge", "lexical", "--store", tmp_path / "s.db", "--depth", "20")
    assert main([*args, "--dry-run"]) == 0
    pairs, cached, sent, shared = _dry_run_counts(capsys.readouterr().err)
    assert (pairs, cached, sent, shared) == (files.n_pairs, 0, files.n_pairs - 3, 3)
    # Graded for real, the run sends what the dry run said; then a copy more is one pair
    # that needs no request of its own.
    assert main([*args, "--quiet"]) == 0
    capsys.readouterr()
    assert main([*args, "--dry-run"]) == 0
    assert _dry_run_counts(capsys.readouterr().err) == (files.n_pairs, files.n_pairs, 0, 0)


def test_dry_run_without_shared_texts_says_nothing_of_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_grade_files(tmp_path)
    assert main(files.args("--judge", "lexical", "--store", tmp_path / "s.db", "--dry-run")) == 0
    err = capsys.readouterr().err
    assert _dry_run_counts(err) == (files.n_pairs, 0, files.n_pairs, 0)
    assert "share a text" not in err


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-small-counts")
    for name in ("OPENAI_BASE_URL", "RELGRADE_MODEL", "RELGRADE_PRICES"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("no_env")
@pytest.mark.parametrize(
    ("model", "shown"),
    [("model-with-no-price", r"\$\?"), ("gpt-4o-mini", r"\$0\.0\d*[1-9]"), (None, r"\$0\.0000")],
)
def test_progress_shows_an_unknown_cost_as_unknown(
    fake_server: FakeServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    model: str | None,
    shown: str,
) -> None:
    """The progress line of a run: `$?` for a model without a price (never `$0.0000`), the
    spend of a priced model, and $0.0000 for the lexical judge (which costs nothing). Here
    stderr is a log: a plain line for every event."""
    import relgrade as rg

    monkeypatch.setenv("RELGRADE_PROGRESS_EVERY", "0")

    files = write_grade_files(tmp_path)
    judge = {"judge": "lexical"} if model is None else {"model": model}
    rg.grade(
        runs=str(files.run),
        queries=str(files.queries),
        docs=str(files.docs),
        base_url=fake_server.base_url,
        store=str(tmp_path / "s.db"),
        progress=True,
        **judge,  # type: ignore[arg-type]
    )
    err = capsys.readouterr().err
    last = err.replace("\r", "\n").strip().splitlines()[-1]
    assert f"{files.n_pairs}/{files.n_pairs}" in last
    assert re.search(shown, last), last
    if model == "model-with-no-price":
        assert "$0.0000" not in err


def test_the_bar_shows_an_unknown_cost_as_unknown() -> None:
    buffer = io.StringIO()
    with GradingProgress(enabled=True, file=buffer) as bar:
        bar(ProgressEvent(total=3, cached=0, done=1, cost_known=False))
        bar(ProgressEvent(total=3, cached=0, done=2, spend=0.25, cost_known=False))
    text = buffer.getvalue()
    assert "$0.2500+?" in text and "$0.0000" not in text
    assert spend_short(0.0, known=False) == "$?" and spend_short(0.5) == "$0.5000"


@pytest.mark.parametrize("kind", ["text", "folder"])
def test_a_store_that_is_not_one_is_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str
) -> None:
    """Exit 2 (bad input), not 1 (which says some pairs failed); from Python an InputError
    that names the keyword, on the command line one that names the flag."""
    import relgrade as rg

    files = write_grade_files(tmp_path)
    store = tmp_path / "notes.txt"
    if kind == "text":
        store.write_text("these are notes, not a database\n" * 50)
    else:
        store.mkdir()
    assert main(files.args("--judge", "lexical", "--store", store)) == 2
    err = capsys.readouterr().err
    assert err.startswith("relgrade grade: error: ") and str(store) in err
    if kind == "text":
        assert "not a usable relgrade store" in err and "--store" in err
    with pytest.raises(rg.InputError) as raised:
        rg.grade(
            runs=str(files.run),
            queries=str(files.queries),
            docs=str(files.docs),
            judge="lexical",
            store=str(store),
            progress=False,
        )
    assert "--store" not in str(raised.value)
    if kind == "text":
        assert "store=" in str(raised.value)
