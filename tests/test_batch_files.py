"""`relgrade batch export` -> an engine (tests/fake_engine.py: vLLM run-batch's output shape,
answering through the fake server) -> `relgrade batch import`, then grade's outputs from the
store, compared with live grading of the same pairs."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from grader.batch.adapter import LLMBatchJudge
from grader.batch.files.export_files import export_requests
from grader.batch.files.import_files import Importer
from grader.batch.files.import_followup import ImportSummary
from grader.batch.job_config import JobJudges, job_config
from grader.cli.main import main
from grader.judges.llm.judge import LLMJudge
from grader.models import Doc, Query
from grader.prompts import PromptSpec, load_prompt
from grader.store.store import Store
from tests import fake_engine
from tests.fakeserver import FakeServer, faults
from tests.grade_data import GradeFiles, write_grade_files

MODEL = ["--model", "fake-model"]


def _export(files: GradeFiles, store: Path, out: Path, *extra: str) -> list[Path]:
    args = ["batch", "export", "--store", str(store), "--queries", str(files.queries)]
    args += ["--docs", str(files.docs), "--run", str(files.run), *MODEL, "--out-dir", str(out)]
    assert main([*args, "--quiet", *extra]) == 0
    return sorted(out.glob("requests-*.jsonl"))


def _engine(server: FakeServer, requests: list[Path], out: Path, **kw: Any) -> list[Path]:
    out.mkdir(exist_ok=True)
    results = []
    for path in requests:
        target = out / f"{path.stem}.results.jsonl"
        fake_engine.run_batch(path, target, fake_engine.http_answer(server.base_url), **kw)
        results.append(target)
    return results


def _judgments(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return {(r["query_id"], r["doc_id"]): r for r in rows}


def _table(db: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(db) as conn:
        return conn.execute("SELECT * FROM judgments ORDER BY key").fetchall()


def _custom_ids(path: Path) -> list[str]:
    return [json.loads(line)["custom_id"] for line in path.read_text().splitlines()]


@pytest.fixture
def files(tmp_path: Path) -> GradeFiles:
    data = write_grade_files(tmp_path, n_queries=4, depth=5)
    # A document repeating another's text under a new id: one request, two id pairs.
    with data.docs.open("a") as fh:
        first = json.loads(data.docs.read_text().splitlines()[0])
        fh.write(json.dumps({**first, "doc_id": "d-copy"}) + "\n")
    with data.run.open("a") as fh:
        fh.write("q0 Q0 d-copy 6 1 bm25\n")
    return data


@pytest.mark.slow
def test_round_trip_equals_live_grading(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = ["--base-url", fake_server.base_url]
    live = ["--store", str(tmp_path / "live.db"), *url, *MODEL, "--quiet", "--depth", "6"]
    outs = ["--out", str(tmp_path / "live.jsonl"), "--qrels-out", str(tmp_path / "live.qrels")]
    assert main(files.args(*live, *outs)) == 0
    live_requests = [r for r in fake_server.requests]
    fake_server.reset()

    db = tmp_path / "batch.db"
    requests = _export(files, db, tmp_path / "out", "--depth", "6", "--batch-max-requests", "8")
    lines = [json.loads(x) for p in requests for x in p.read_text().splitlines()]
    assert [len(p.read_text().splitlines()) for p in requests] == [8, 8, 4]  # 21 pairs, 20 texts
    assert {x["url"] for x in lines} == {"/v1/chat/completions"}
    # Each request is exactly what live grading sent for the pair.
    assert sorted(json.dumps(x["body"], sort_keys=True) for x in lines) == sorted(
        json.dumps(b, sort_keys=True) for b in live_requests
    )

    # The engine: one error line, one reply the validator refuses, a truncated last line.
    bad = _custom_ids(requests[0])[2]
    fake_server.enqueue(faults.bad_grade(7))  # the first line of file 1 gets grade 7
    results = _engine(fake_server, requests[:2], tmp_path / "res", fail_ids=[bad])
    results += _engine(fake_server, requests[2:], tmp_path / "res", truncate_last=True)
    capsys.readouterr()
    assert main(["batch", "import", "--store", str(db), str(tmp_path / "res"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "imported 19 lines of 3 files: 17 ok, 2 failed" in err
    assert "1 missing" in err and "last line cut short" in err
    with Store(db) as store:
        failed = {j.error.type for j in store.iter_judgments(status="failed") if j.error}
        assert store.count(status="failed") == 3 and store.count(status="ok") == 17
    assert failed == {"Batch:http_400", "InvalidReply", "Batch:missing"}
    conn = sqlite3.connect(db)
    unlisted = conn.execute(
        "SELECT COUNT(*) FROM judgments j WHERE NOT EXISTS (SELECT 1 FROM judgment_pairs p"
        " WHERE p.key = j.key AND p.query_id = j.query_id AND p.doc_id = j.doc_id)"
    ).fetchone()[0]
    conn.close()
    assert unlisted == 0  # the export listed each line's id pair; the import relies on it

    # batch status: lines that came back
    assert main(["batch", "status", "--store", str(db), "--exports", "--format", "json"]) == 0
    (status,) = json.loads(capsys.readouterr().out)
    assert (status["lines"], status["pairs"], status["returned"]) == (20, 21, 20)
    assert (status["returned_failed"], status["files"]) == (3, 3)

    # Re-export: only the three without a grade.
    again = _export(files, db, tmp_path / "out2", "--depth", "6")
    assert sum(len(p.read_text().splitlines()) for p in again) == 3

    fake_server.reset()
    reask = ["batch", "import", "--store", str(db), str(tmp_path / "res"), "--reask", *url]
    assert main([*reask, "--quiet"]) == 0
    assert fake_server.counts["requests"] == 3

    fake_server.reset()
    ours = ["--store", str(db), *url, *MODEL, "--quiet", "--depth", "6"]
    outs = ["--out", str(tmp_path / "b.jsonl"), "--qrels-out", str(tmp_path / "b.qrels")]
    assert main(files.args(*ours, *outs)) == 0
    assert fake_server.counts["requests"] == 0  # every pair came from the store
    assert (tmp_path / "b.qrels").read_text() == (tmp_path / "live.qrels").read_text()
    a, b = _judgments(tmp_path / "live.jsonl"), _judgments(tmp_path / "b.jsonl")
    assert len(a) == 21 and a.keys() == b.keys()
    same = ("grade", "status", "reason", "key", "distribution", "expected_grade", "prompt")
    for pair in a:
        assert {k: a[pair][k] for k in same} == {k: b[pair][k] for k in same}, pair


def test_import_twice_changes_nothing(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "b.db"
    requests = _export(files, db, tmp_path / "out")
    results = _engine(
        fake_server, requests, tmp_path / "res", fail_ids=[_custom_ids(requests[0])[0]]
    )
    assert main(["batch", "import", "--store", str(db), *map(str, results), "--quiet"]) == 1
    first = _table(db)
    capsys.readouterr()
    assert main(["batch", "import", "--store", str(db), *map(str, results), "--quiet"]) == 1
    assert "0 ok, 0 failed, 0 missing (no results line) stored by this import; 20 already" in (
        capsys.readouterr().err
    )
    assert _table(db) == first  # not one row rewritten, not even a timestamp


def test_results_of_another_export_are_refused(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    requests = _export(files, tmp_path / "a.db", tmp_path / "out-a")
    results = _engine(fake_server, requests, tmp_path / "res")
    _export(files, tmp_path / "b.db", tmp_path / "out-b")
    capsys.readouterr()
    assert main(["batch", "import", "--store", str(tmp_path / "b.db"), *map(str, results)]) == 2
    err = capsys.readouterr().err
    assert "which this store did not make" in err and f"{results[0]}:1:" in err
    with Store(tmp_path / "b.db") as store:
        assert store.count() == 0

    # A line whose key the export never asked (another prompt or model): refused, named.
    lines = results[0].read_text().splitlines()
    record = json.loads(lines[1])
    export_id = record["custom_id"].split(":")[1]
    record["custom_id"] = f"relgrade:{export_id}:sha256:{'0' * 64}"
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join([lines[0], json.dumps(record), *lines[2:]]) + "\n")
    assert main(["batch", "import", "--store", str(tmp_path / "a.db"), str(edited)]) == 2
    assert "never asked for" in capsys.readouterr().err
    with Store(tmp_path / "a.db") as store:
        assert store.count() == 0  # the chunk holding the bad line stored nothing


def _big_export(tmp_path: Path, n: int) -> tuple[Path, list[Path]]:
    """`n` pairs exported through the library, answered without HTTP (fake server replies)."""
    db = tmp_path / "big.db"
    spec = load_prompt("passage")
    from grader.judges.llm.judge import LLMJudge

    live = LLMJudge(model="fake-model", prompt=spec, base_url="http://127.0.0.1:9/v1")
    judge = LLMBatchJudge(live)
    pairs = (
        (
            Query(query_id=f"q{i // 10}", text=f"query {i // 10}"),
            Doc(doc_id=f"d{i}", text=f"doc {i}"),
        )
        for i in range(n)
    )
    with Store(db) as store:
        summary = export_requests(
            store, judge, job_config(judge, "passage"), pairs, tmp_path / "out"
        )
    server = FakeServer()
    results = []
    for path in summary.files:
        target = tmp_path / f"{path.stem}.results.jsonl"
        fake_engine.run_batch(path, target, lambda body: (200, server.completion_for(body), None))
        results.append(target)
    return db, results


@pytest.mark.slow
def test_sigkill_during_import_then_import_again(tmp_path: Path) -> None:
    db, results = _big_export(tmp_path, 6000)
    env = {**os.environ, "RELGRADE_TEST_IMPORT_PAUSE": "30"}
    cmd = [sys.executable, "-m", "grader.cli.main", "batch", "import", "--store", str(db)]
    child = subprocess.Popen([*cmd, *map(str, results)], env=env, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    stored = 0
    while time.monotonic() < deadline and stored == 0:
        time.sleep(0.1)
        with sqlite3.connect(db) as conn:
            stored = conn.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL
    assert 0 < stored < 6000  # killed with the first chunk stored, the rest not

    again = subprocess.run([*cmd, *map(str, results)], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert f"{6000 - stored:,} ok, 0 failed, 0 missing" in again.stderr
    assert f"{stored:,} already stored" in again.stderr
    with Store(db) as store:
        assert store.count(status="ok") == 6000 and store.count() == 6000
    with sqlite3.connect(db) as conn:
        outcomes = conn.execute("SELECT outcome, COUNT(*) FROM export_lines GROUP BY 1").fetchall()
    assert outcomes == [("ok", 6000)]


def test_lines_answered_by_another_model_fail_and_are_never_grades(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "m.db"
    requests = _export(files, db, tmp_path / "out")
    answer = fake_engine.http_answer(fake_server.base_url)
    other = set(_custom_ids(requests[0])[:3])
    results = []
    (tmp_path / "res").mkdir()
    for path in requests:
        target = tmp_path / "res" / f"{path.stem}.results.jsonl"
        fake_engine.run_batch(path, target, answer)
        lines = [json.loads(x) for x in target.read_text().splitlines()]
        for line in lines:
            if line["custom_id"] in other:
                line["response"]["body"]["model"] = "other-model"
            elif line["response"]["body"]:
                line["response"]["body"]["model"] = "fake-model-2024-07-18"  # a dated snapshot
        target.write_text("".join(json.dumps(x) + "\n" for x in lines))
        results.append(target)
    capsys.readouterr()
    assert main(["batch", "import", "--store", str(db), *map(str, results), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "3 failed (ModelMismatch 3)" in err
    with Store(db) as store:
        failed = {j.key: j for j in store.iter_judgments(status="failed")}
        ok = store.count(status="ok")
    assert len(failed) == 3 and ok == 17
    assert all(j.grade is None and j.error is not None for j in failed.values())
    assert all("answered by model 'other-model'" in j.error.message for j in failed.values())  # type: ignore[union-attr]


def test_an_empty_results_file_is_said_and_all_empty_is_an_error(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "e.db"
    requests = _export(files, db, tmp_path / "out")
    empty = tmp_path / "empty.results.jsonl"
    empty.write_text("")
    capsys.readouterr()
    assert main(["batch", "import", "--store", str(db), str(empty)]) == 2
    err = capsys.readouterr().err
    assert "no results lines: the file is empty; nothing was imported" in err
    assert str(empty) in err and "vllm run-batch" in err
    results = _engine(fake_server, requests, tmp_path / "res")
    assert main(["batch", "import", "--store", str(db), str(empty), *map(str, results)]) == 0
    err = capsys.readouterr().err
    assert f"{empty}: no results lines (empty)" in err
    with Store(db) as store:
        assert store.count(status="ok") == 20


def test_a_repeated_text_across_a_file_boundary_is_exported_once(
    files: GradeFiles, tmp_path: Path
) -> None:
    """q0/d-copy repeats q0/d0's texts five lines later; with 3 lines a file they fall in
    different files, and the second is still the same request (one line, both id pairs)."""
    db = tmp_path / "x.db"
    requests = _export(files, db, tmp_path / "out", "--depth", "6", "--batch-max-requests", "3")
    keys = [cid for p in requests for cid in _custom_ids(p)]
    assert len(keys) == len(set(keys)) == 20  # 21 pairs, 20 texts
    with Store(db) as store:
        assert store.count() == 0
    with sqlite3.connect(db) as conn:
        pairs = conn.execute("SELECT COUNT(*) FROM judgment_pairs").fetchone()[0]
    conn.close()
    assert pairs == 21


def test_reask_does_not_pay_again_for_a_key_answered_since(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = ["--base-url", fake_server.base_url]
    db = tmp_path / "r.db"
    requests = _export(files, db, tmp_path / "out")
    failing = _custom_ids(requests[0])[:2]
    results = _engine(fake_server, requests, tmp_path / "res", fail_ids=failing)
    assert main(["batch", "import", "--store", str(db), *map(str, results), "--quiet"]) == 1
    # The two failed pairs are graded live meanwhile (same prompt and model: same keys).
    assert main(files.args("--store", str(db), *url, *MODEL, "--quiet")) == 0
    fake_server.reset()
    reask = ["batch", "import", "--store", str(db), *map(str, results), "--reask", *url]
    assert main([*reask, "--quiet"]) == 0
    assert fake_server.counts["requests"] == 0
    with sqlite3.connect(db) as conn:
        outcomes = dict(conn.execute("SELECT outcome, COUNT(*) FROM export_lines GROUP BY 1"))
    conn.close()
    assert outcomes == {"ok": 20}


def test_one_import_of_two_exports_sharing_keys_sets_each_exports_outcome(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path
) -> None:
    """Exports A and B ask the same keys; B's results first came back failed. Importing A's
    results and B's again in one go: A's answers are stored, and B's lines are ok too (the
    store's status is per key, a line's outcome per export)."""
    db = tmp_path / "ab.db"
    a = _export(files, db, tmp_path / "a")
    b = _export(files, db, tmp_path / "b", "--include-pending")  # the same keys again
    every = [cid for p in b for cid in _custom_ids(p)]
    b_failed = _engine(fake_server, b, tmp_path / "res-b", fail_ids=every)
    assert main(["batch", "import", "--store", str(db), *map(str, b_failed), "--quiet"]) == 1
    a_ok = _engine(fake_server, a, tmp_path / "res-a")
    both = [*map(str, a_ok), *map(str, b_failed)]
    assert main(["batch", "import", "--store", str(db), *both, "--quiet"]) == 0
    with sqlite3.connect(db) as conn:
        outcomes = conn.execute(
            "SELECT export_id, outcome, COUNT(*) FROM export_lines GROUP BY 1, 2"
        ).fetchall()
    conn.close()
    assert sorted(o for _, o, _ in outcomes) == ["ok", "ok"]
    assert sum(n for *_, n in outcomes) == 40


def test_reask_alone_leaves_out_keys_answered_since(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path
) -> None:
    """`reask_failed` without an import before it (which would mark those lines ok first):
    failed lines whose keys the store holds ok by now are set ok and not asked again."""
    url = ["--base-url", fake_server.base_url]
    db = tmp_path / "r.db"
    requests = _export(files, db, tmp_path / "out")
    failing = _custom_ids(requests[0])[:2]
    results = _engine(fake_server, requests, tmp_path / "res", fail_ids=failing)
    assert main(["batch", "import", "--store", str(db), *map(str, results), "--quiet"]) == 1
    assert main(files.args("--store", str(db), *url, *MODEL, "--quiet")) == 0  # graded live
    fake_server.reset()
    export_id = failing[0].split(":")[1]

    def make_judge(model: str, prompt: PromptSpec) -> LLMJudge:
        return LLMJudge(model=model, prompt=prompt, base_url=fake_server.base_url)

    with Store(db) as store, Importer(store, JobJudges(make_judge).for_job) as importer:
        importer.judge(export_id, results[0])
        summary = ImportSummary(touched={(export_id, 1)})
        asyncio.run(importer.reask_failed(summary))
        assert importer.unresolved(summary) == 0
    assert fake_server.counts["requests"] == 0
    assert summary.reasked_ok == summary.reasked_failed == 0


def test_a_second_export_of_requests_waiting_in_another_is_warned(
    files: GradeFiles, fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "w.db"
    first = _export(files, db, tmp_path / "a")
    first_id = _custom_ids(first[0])[0].split(":")[1]
    n = sum(len(p.read_text().splitlines()) for p in first)
    capsys.readouterr()
    _export(files, db, tmp_path / "b", "--include-pending")  # the same, none imported yet
    err = capsys.readouterr().err
    assert f"warning: {n:,} of these requests are also in export {first_id}" in err
    results = _engine(fake_server, first, tmp_path / "res")
    assert main(["batch", "import", "--store", str(db), *map(str, results), "--quiet"]) == 0
    capsys.readouterr()
    third = _export(files, db, tmp_path / "c")  # all graded now: nothing to pay twice
    err = capsys.readouterr().err
    assert sum(len(p.read_text().splitlines()) for p in third) == 0
    assert "warning" not in err
