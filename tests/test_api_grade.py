"""`relgrade.grade` / `agrade`: the command's grades through the real SDK against the fake server,
inside a running event loop (as in Jupyter), from the inputs notebooks hold."""

from __future__ import annotations

import asyncio
import sys
import threading
import types
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import relgrade as rg
from grader.cli.main import main
from grader.errors import InputError, RelgradeWarning
from grader.io.judgments import read_judgments
from tests.fakeserver import FakeServer, faults
from tests.grade_data import GradeFiles, write_grade_files


@pytest.fixture
def files(tmp_path: Path) -> GradeFiles:
    return write_grade_files(tmp_path)


def _command_grades(
    files: GradeFiles, server: FakeServer, store: Path, out: Path
) -> dict[tuple[str, str], int | None]:
    args = files.args("--base-url", server.base_url, "--store", store, "--quiet", "--out", out)
    assert main(args) == 0
    return {(j.query_id, j.doc_id): j.grade for j in read_judgments(out)}


@pytest.mark.slow
@pytest.mark.usefixtures("llm_env")
def test_grade_in_a_running_loop_equals_the_command_and_reruns_free(
    fake_server: FakeServer, files: GradeFiles, tmp_path: Path
) -> None:
    command = _command_grades(files, fake_server, tmp_path / "cli.db", tmp_path / "cli.jsonl")
    fake_server.reset()

    async def in_a_notebook() -> pd.DataFrame:
        asyncio.get_running_loop()  # as in Jupyter: a loop runs while the cell calls grade
        return rg.grade(
            runs=files.run,
            queries=files.queries,
            docs=files.docs,
            base_url=fake_server.base_url,
            store=tmp_path / "api.db",
            progress=False,
        )

    frame = asyncio.run(in_a_notebook())
    assert fake_server.counts["requests"] == files.n_pairs
    assert list(frame.columns[:7]) == [
        "query_id",
        "doc_id",
        "grade",
        "status",
        "reason",
        "judge",
        "prompt",
    ]
    assert dict(zip(zip(frame.query_id, frame.doc_id, strict=True), frame.grade, strict=True)) == (
        command
    )
    assert (frame.status == "ok").all() and frame.prompt.str.startswith("passage@").all()
    again = asyncio.run(in_a_notebook())
    assert fake_server.counts["requests"] == files.n_pairs  # the rerun sent nothing
    pd.testing.assert_frame_equal(
        again[["query_id", "doc_id", "grade"]], frame[["query_id", "doc_id", "grade"]]
    )


@pytest.mark.slow
@pytest.mark.usefixtures("llm_env")
def test_agrade_awaits_in_the_callers_loop(
    fake_server: FakeServer, files: GradeFiles, tmp_path: Path
) -> None:
    """While `agrade` awaits replies the server holds, another task of the caller's loop runs:
    it sees the requests arrive, ticks, and is what lets the server answer. An `agrade` that
    blocked the loop would leave the ticker still, and the replies would be let go only by the
    safety timer (the test then fails, it does not hang)."""
    command = _command_grades(files, fake_server, tmp_path / "cli.db", tmp_path / "cli.jsonl")
    fake_server.reset()
    released = fake_server.hold_replies_after(0)  # no reply until the ticker says so
    seen: dict[str, int] = {"ticks": 0, "requests_held": 0}

    async def ticker() -> None:
        while not released.is_set():
            await asyncio.sleep(0.005)
            held = fake_server.counts["requests"]
            if held:
                seen["ticks"] += 1
                seen["requests_held"] = max(seen["requests_held"], held)
            if seen["ticks"] >= 20:  # the loop ran 20 times while agrade awaited: let go
                seen["released_by_ticker"] = 1
                released.set()

    async def caller() -> pd.DataFrame:
        task = asyncio.create_task(ticker())
        frame = await rg.agrade(
            runs=[files.run],
            queries=files.queries,
            docs=files.docs,
            base_url=fake_server.base_url,
            store=tmp_path / "api.db",
            progress=False,
        )
        await task
        return frame

    safety = threading.Timer(30.0, released.set)
    safety.start()
    try:
        frame = asyncio.run(caller())
    finally:
        safety.cancel()
    assert seen.get("released_by_ticker") == 1, seen
    assert seen["ticks"] >= 20 and seen["requests_held"] >= 1
    got = dict(zip(zip(frame.query_id, frame.doc_id, strict=True), frame.grade, strict=True))
    assert got == command


@pytest.mark.usefixtures("llm_env")
def test_failures_are_rows_without_a_grade_and_a_warning(
    fake_server: FakeServer, files: GradeFiles, tmp_path: Path
) -> None:
    fake_server.default_fault = faults.bad_grade(7)  # every reply out of range: never a grade
    with pytest.warns(RelgradeWarning, match="failed"):
        frame = rg.grade(
            runs=files.run,
            queries=files.queries,
            docs=files.docs,
            base_url=fake_server.base_url,
            store=tmp_path / "s.db",
            progress=False,
            max_attempts=1,
        )
    assert len(frame) == files.n_pairs
    assert (frame.status == "failed").all()
    assert frame.grade.isna().all() and str(frame.grade.dtype) == "Int64"
    assert frame.error.notna().all()
    with pytest.raises(InputError, match="no row has a grade"):
        rg.evaluate(frame, files.run)  # failed rows stay unjudged: nothing to score, never 0


def test_lexical_grades_a_pyterrier_frame_offline(files: GradeFiles, tmp_path: Path) -> None:
    run = rg.read_run(files.run)
    queries = dict(line.split("\t") for line in files.queries.read_text().splitlines())
    pyterrier = pd.DataFrame(
        {
            "qid": run.query_id,
            "docno": run.doc_id,
            "score": run.score,
            "rank": run["rank"] - 1,  # PyTerrier ranks from 0; relgrade ranks by score anyway
            "query": run.query_id.map(queries),
        }
    )
    frame = rg.grade(runs=pyterrier, docs=files.docs, judge="lexical", store=tmp_path / "a.db")
    out = tmp_path / "cli.jsonl"
    args = files.args("--judge", "lexical", "--store", tmp_path / "b.db", "--out", out, "--quiet")
    assert main(args) == 0
    command = {(j.query_id, j.doc_id): j.grade for j in read_judgments(out)}
    got = dict(zip(zip(frame.query_id, frame.doc_id, strict=True), frame.grade, strict=True))
    assert got == command and len(got) == files.n_pairs


def test_pairs_frame_and_its_errors(tmp_path: Path) -> None:
    pairs = pd.DataFrame(
        {
            "qid": ["q1", "q1"],
            "docno": ["a", "b"],
            "query": ["retry backoff", "retry backoff"],
            "text": ["retry with exponential backoff", "a recipe for soup"],
        }
    )
    frame = rg.grade(pairs, judge="lexical", store=tmp_path / "s.db", progress=False)
    assert frame.doc_id.tolist() == ["a", "b"] and (frame.status == "ok").all()
    assert frame.grade[0] > frame.grade[1]
    with pytest.raises(InputError, match=r"columns qid, docno: it lacks query, text"):
        rg.grade(pairs[["qid", "docno"]], judge="lexical", store=tmp_path / "s.db")
    with pytest.raises(TypeError, match="no option 'colour'"):
        rg.grade(pairs, judge="lexical", store=tmp_path / "s.db", colour="red")


def test_the_commands_errors_as_exceptions(
    files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(InputError) as api:
        rg.grade(
            runs=files.run,
            queries=files.queries,
            docs=files.docs,
            judge="lexical",
            model="x",
            store=tmp_path / "s.db",
        )
    capsys.readouterr()
    code = main(files.args("--judge", "lexical", "--model", "x", "--store", tmp_path / "t.db"))
    assert code == 2
    assert capsys.readouterr().err == f"relgrade grade: error: {api.value}\n"
    assert "--model is for LLM judges" in str(api.value)


def test_progress_line_in_a_notebook(
    files: GradeFiles,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A notebook's kernel is loaded (elsewhere, a script's log gets a line every 30 s)
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rg.grade(
            runs=files.run,
            queries=files.queries,
            docs=files.docs,
            judge="lexical",
            store=tmp_path / "s.db",
        )
    err = capsys.readouterr().err
    # tqdm's bar when tqdm is installed, else one line rewritten in place: both end on the total
    last = err.rsplit("\r", 1)[-1]
    assert f"{files.n_pairs}/{files.n_pairs}" in last and "cached 0 · failed 0" in last


def test_judgments_frame_round_trips_as_qrels(files: GradeFiles, tmp_path: Path) -> None:
    frame = rg.grade(
        runs=files.run,
        queries=files.queries,
        docs=files.docs,
        judge="lexical",
        store=tmp_path / "s.db",
        progress=False,
    )
    qrels = rg.read_qrels(frame)
    assert len(qrels) == files.n_pairs and qrels.grade.dtype == "int64"
    scores = rg.evaluate(frame, files.run, ["Judged@4"])
    assert scores.value.tolist() == [1.0]


def test_grade_and_agrade_take_the_same_keywords_and_give_the_same_frame(
    files: GradeFiles, tmp_path: Path
) -> None:
    import inspect

    assert inspect.signature(rg.grade).parameters == inspect.signature(rg.agrade).parameters
    # One doc unknown (skipped), one query with no scorable term (failed): notes and warnings.
    docs = files.docs.read_text().splitlines()
    files.docs.write_text("".join(f"{line}\n" for line in docs[1:]))
    queries = files.queries.read_text().splitlines()
    files.queries.write_text("".join(f"{line}\n" for line in ["q0\tthe", *queries[1:]]))
    given: dict[str, Any] = {"runs": files.run, "queries": files.queries, "docs": files.docs}
    given |= {"depth": 3}
    given |= {"judge": "lexical", "progress": False}
    given |= {"skip_missing": True}

    def call(function: str) -> tuple[pd.DataFrame, list[tuple[str, str]]]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            store = tmp_path / f"{function}.db"
            if function == "grade":
                frame = rg.grade(**given, store=store)
            else:

                async def in_a_notebook() -> pd.DataFrame:
                    return await rg.agrade(**given, store=store)  # warnings point here

                frame = asyncio.run(in_a_notebook())
        said = [(str(w.message), Path(w.filename).name) for w in caught]
        return frame, said

    by_grade, said_grade = call("grade")
    by_agrade, said_agrade = call("agrade")
    stamps = ["created_at", "latency_ms"]
    pd.testing.assert_frame_equal(by_grade.drop(columns=stamps), by_agrade.drop(columns=stamps))
    assert by_grade.attrs == by_agrade.attrs
    assert "skipped 1 pairs with unknown ids" in by_grade.attrs["notes"]
    assert said_grade == said_agrade and said_grade
    assert {name for _, name in said_grade} == {Path(__file__).name}
