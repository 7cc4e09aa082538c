"""`batch import` with worker processes: the same answers, counts and outcomes as reading every
line in one process, duplicates decided in file order across ranges, idempotent, and a killed
import (workers and all) resumed by importing again."""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grader.batch import adapter
from grader.batch.adapter import JobJudges
from grader.batch.files import import_work
from grader.batch.files.import_files import Importer
from grader.batch.files.import_followup import ImportSummary
from grader.batch.files.import_work import count_newlines, line_ranges
from grader.errors import InputError
from grader.store.store import Store
from tests import fake_engine
from tests.fakeserver import FakeServer
from tests.helpers.batch_import import (
    engine_results,
    export_pairs,
    import_results,
    unreachable_judge,
)
from tests.helpers.judgments import stored_judgments


def _rows(db: Path) -> list[tuple[Any, ...]]:
    """Every judgment (its JSON without the time it was made) and every line's outcome."""
    with sqlite3.connect(db) as conn:
        judgments = conn.execute(
            "SELECT key, query_id, doc_id, status, grade, judgment FROM judgment_rows ORDER BY key"
        ).fetchall()
        outcomes = conn.execute("SELECT key, outcome FROM export_lines ORDER BY key").fetchall()
    rows: list[tuple[Any, ...]] = []
    for *cols, text in judgments:
        data = json.loads(text)
        data.pop("created_at")
        rows.append((*cols, data))
    return rows + outcomes


def _counts(s: ImportSummary) -> tuple[Any, ...]:
    return (s.lines, s.ok, s.failed, s.missing, s.already, s.n_malformed, s.problems, s.truncated)


def _both(tmp_path: Path, db: Path, results: list[Path]) -> tuple[ImportSummary, ImportSummary]:
    """The same import in this process and with two workers, into copies of the store."""
    one, two = tmp_path / "one.db", tmp_path / "two.db"
    shutil.copy(db, one)
    shutil.copy(db, two)
    inline = import_results(one, results, 0)
    pooled = import_results(two, results, 2)
    assert _counts(pooled) == _counts(inline)
    assert _rows(two) == _rows(one)
    return inline, pooled


def test_ranges_cover_every_line_once(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    lines = [b"x" * (i % 50) + b"\n" for i in range(500)] + [b"y" * 3000 + b"\n", b"last"]
    path.write_bytes(b"".join(lines))
    ranges = list(line_ranges(path, 700))
    assert ranges[0][:3] == (0, ranges[0][1], 1) and ranges[-1][1] == path.stat().st_size
    assert [r[3] for r in ranges] == [False] * (len(ranges) - 1) + [True]
    data = path.read_bytes()
    for start, _end, first, _ in ranges:
        assert start == 0 or data[start - 1 : start] == b"\n"  # whole lines
        assert data[:start].count(b"\n") + 1 == first  # the number of its first line
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))


@given(st.binary(max_size=40).map(lambda b: b.replace(b"a", b"\n")), st.integers(0, 40))
def test_count_newlines_counts_as_count_does(data: bytes, end: int) -> None:
    assert count_newlines(data, end) == data.count(b"\n", 0, end)


@pytest.mark.slow
def test_workers_give_what_one_process_gives(tmp_path: Path) -> None:
    db, requests = export_pairs(tmp_path, 400)
    server = FakeServer()
    failing = [json.loads(x)["custom_id"] for x in requests[0].read_text().splitlines()[5:9]]
    results = engine_results(
        server, requests, tmp_path / "res", bad={"3", "77"}, fail_ids=failing, truncate_last=True
    )
    inline, _ = _both(tmp_path, db, results)
    assert (inline.lines, inline.ok, inline.failed, inline.missing) == (399, 393, 6, 1)
    assert inline.problems == {"InvalidReply": 2, "Batch:http_400": 4}
    assert len(inline.truncated) == 1


@pytest.mark.slow
def test_duplicates_across_ranges_are_decided_in_file_order(tmp_path: Path) -> None:
    """The same requests answered twice: first with errors, then well. Read in one import,
    every key ends ok; the second copy's lines of keys already ok are 'already'."""
    db, requests = export_pairs(tmp_path, 300)
    server = FakeServer()
    failing = [json.loads(x)["custom_id"] for x in requests[0].read_text().splitlines()[:50]]
    first = engine_results(server, requests, tmp_path / "a", bad=set(), fail_ids=failing)
    second = engine_results(server, requests, tmp_path / "b", bad=set())
    inline, _ = _both(tmp_path, db, [*first, *second, *first])
    assert (inline.ok, inline.failed, inline.already) == (300, 50, 550)
    with Store(tmp_path / "two.db") as store:
        assert store.count(status="ok") == 300 and store.count() == 300


@pytest.mark.slow
def test_import_twice_with_workers_changes_nothing(tmp_path: Path) -> None:
    db, requests = export_pairs(tmp_path, 300)
    results = engine_results(FakeServer(), requests, tmp_path / "res", bad={"5"})
    first = import_results(db, results, 2)
    assert (first.ok, first.failed) == (299, 1)
    with sqlite3.connect(db) as conn:
        before = conn.execute("SELECT * FROM judgments ORDER BY key").fetchall()
    again = import_results(db, results, 2)
    assert (again.ok, again.failed, again.already) == (0, 0, 300)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT * FROM judgments ORDER BY key").fetchall() == before


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(x) for x in text.split()]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


@pytest.mark.slow
def test_sigkill_during_import_with_workers_then_import_again(tmp_path: Path) -> None:
    db, requests = export_pairs(tmp_path, 6000)
    results = engine_results(FakeServer(), requests, tmp_path / "res", bad=set())
    env = {**os.environ, "RELGRADE_TEST_IMPORT_PAUSE": "30"}
    cmd = [sys.executable, "-m", "grader.cli.main", "batch", "import", "--store", str(db)]
    child = subprocess.Popen(
        [*cmd, "--workers", "2", *map(str, results)], env=env, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 120
    stored = 0
    while time.monotonic() < deadline and stored == 0:
        time.sleep(0.1)
        with sqlite3.connect(db) as conn:
            stored = conn.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]
    workers = _children(child.pid)
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert child.returncode == -signal.SIGKILL
    assert 0 < stored < 6000 and len(workers) >= 2
    deadline = time.monotonic() + 120  # a bound for a busy machine, not a timing
    while time.monotonic() < deadline and any(map(_alive, workers)):
        time.sleep(0.2)
    assert not any(map(_alive, workers))  # the workers end with the import that started them

    again = subprocess.run([*cmd, *map(str, results)], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert f"{6000 - stored:,} ok, 0 failed, 0 missing" in again.stderr
    with Store(db) as store:
        assert store.count(status="ok") == 6000 and store.count() == 6000
    with sqlite3.connect(db) as conn:
        outcomes = conn.execute("SELECT outcome, COUNT(*) FROM export_lines GROUP BY 1").fetchall()
    assert outcomes == [("ok", 6000)]


@pytest.mark.parametrize(
    ("table", "where", "pair"),
    [("docs", "doc_id = 'd5'", "(q0, d5)"), ("queries", "query_id = 'q1'", "(q1, d10)")],
)
@pytest.mark.parametrize("workers", [0, 2])  # raised in this process, or in a worker
def test_a_pair_whose_texts_are_gone_stops_the_import_naming_it(
    tmp_path: Path, table: str, where: str, pair: str, workers: int
) -> None:
    db, requests = export_pairs(tmp_path, 30)
    results = engine_results(FakeServer(), requests, tmp_path / "results", bad=set())
    with sqlite3.connect(db) as conn:
        conn.execute(f"DELETE FROM {table} WHERE {where}")
    with pytest.raises(InputError, match=re.escape(f"the store has no text for {pair}")):
        import_results(db, results, workers)


def test_a_secret_in_a_reply_is_masked_in_the_stored_judgment(tmp_path: Path) -> None:
    db, requests = export_pairs(tmp_path, 20)
    server = FakeServer()

    def leaky(body: dict[str, Any]) -> tuple[int, dict[str, Any] | None, str | None]:
        reply = server.completion_for(body)
        content = json.loads(reply["choices"][0]["message"]["content"])
        if "doc 3 " in body["messages"][-1]["content"]:
            content["reason"] = "it says sk-test-secret-123"
        reply["choices"][0]["message"]["content"] = json.dumps(content)
        return 200, reply, None

    out = tmp_path / "results.jsonl"
    fake_engine.run_batch(requests[0], out, leaky)
    with (
        Store(db, secrets=["sk-test-secret-123"]) as store,
        Importer(store, JobJudges(unreachable_judge).for_job, workers=0) as importer,
    ):
        summary = importer.run([out])
        stored = {j.doc_id: j for j in stored_judgments(store)}
    assert summary.ok == 20
    assert stored["d3"].reason == "it says [redacted]"
    assert "sk-test-secret-123" not in db.read_bytes().decode("latin-1")
    assert stored["d4"].reason == "Scripted by the fake server."


@pytest.mark.slow
def test_lines_not_read_the_fast_way_are_read_whole(tmp_path: Path) -> None:
    """A line with other characters than ASCII is read whole (the same judgment as the same
    line escaped), one with bytes that are not UTF-8 in a field the import skips is malformed
    as `json.loads` finds it, and so is one nested too deeply to decode."""
    db, requests = export_pairs(tmp_path, 20)
    server = FakeServer()

    def accented(body: dict[str, Any]) -> tuple[int, dict[str, Any] | None, str | None]:
        reply = server.completion_for(body)
        reply["choices"][0]["message"]["content"] = '{"reason": "très pertinent", "grade": 2}'
        return 200, reply, None

    escaped = tmp_path / "escaped" / "results.jsonl"
    escaped.parent.mkdir()
    fake_engine.run_batch(requests[0], escaped, accented)
    lines = [json.loads(x) for x in escaped.read_text().splitlines()]
    raw = [json.dumps(x, ensure_ascii=False).encode() for x in lines]
    raw[3] = raw[3].replace(b'"id": "', b'"id": "\xff', 1)
    raw[5] = raw[5][:-1] + b', "deep": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    plain = tmp_path / "plain" / "results.jsonl"
    plain.parent.mkdir()
    plain.write_bytes(b"\n".join(raw) + b"\n")

    inline, _ = _both(tmp_path, db, [plain])  # (workers give the same)
    assert (inline.lines, inline.ok, inline.n_malformed) == (18, 18, 2)
    assert inline.malformed == [f"{plain}:4", f"{plain}:6"]
    shutil.copy(db, tmp_path / "escaped.db")
    import_results(tmp_path / "escaped.db", [escaped], 0)
    left_out = {lines[3]["custom_id"].split(":", 2)[2], lines[5]["custom_id"].split(":", 2)[2]}

    def judgments(db: Path) -> list[tuple[Any, ...]]:
        return [r for r in _rows(db) if len(r) > 2 and r[0] not in left_out]

    assert judgments(tmp_path / "one.db") == judgments(tmp_path / "escaped.db")
    with Store(tmp_path / "one.db") as store:
        assert {j.reason for j in stored_judgments(store, status="ok")} == {"très pertinent"}
        failed = [j.error.type for j in stored_judgments(store, status="failed") if j.error]
    assert failed == ["Batch:missing"] * 2  # the two malformed lines' requests


def test_blank_lines_crlf_and_a_last_line_without_newline_are_read_as_lines(
    tmp_path: Path,
) -> None:
    """Blank and whitespace-only lines are skipped but counted in line numbers, CRLF ends
    are read, and a complete last line without a newline is imported, not cut short."""
    db, requests = export_pairs(tmp_path, 30)
    clean = engine_results(FakeServer(), requests, tmp_path / "clean", bad=set())
    lines = clean[0].read_bytes().splitlines()
    messy = [b"", *lines[:10], b"  \t", b"\x0c", b"{not json", *lines[10:]]
    path = tmp_path / "messy" / "results.jsonl"
    path.parent.mkdir()
    path.write_bytes(b"\r\n".join(messy))  # and no newline after the last line
    inline, _ = _both(tmp_path, db, [path])  # (workers give the same)
    assert (inline.lines, inline.ok, inline.n_malformed, inline.truncated) == (30, 30, 1, [])
    assert inline.malformed == [f"{path}:14"]


def test_an_error_line_read_the_fast_way_is_worded_from_all_of_it(tmp_path: Path) -> None:
    """A line the import read keeping only a reply's keys, that turns out not to be a valid
    reply (an error body in the Batch API's shape, a refusal), is judged from the whole line:
    its failure says what the engine said, and it is never a grade."""
    db, requests = export_pairs(tmp_path, 20)
    server = FakeServer()

    def answer(body: dict[str, Any]) -> tuple[int, dict[str, Any] | None, str | None]:
        user = body["messages"][-1]["content"]
        if "doc 3 " in user:
            error = {"code": "rate_limit_exceeded", "message": "slow down", "type": "requests"}
            return 429, {"error": error}, None
        reply = server.completion_for(body)
        if "doc 4 " in user:
            reply["choices"][0]["message"].update(content=None, refusal="I will not grade")
        return 200, reply, None

    out = tmp_path / "results.jsonl"
    fake_engine.run_batch(requests[0], out, answer)
    summary = import_results(db, [out], 0)
    assert (summary.ok, summary.failed) == (18, 2)
    with Store(db) as store:
        failed = {j.doc_id: j for j in stored_judgments(store, status="failed")}
    assert set(failed) == {"d3", "d4"} and all(j.grade is None for j in failed.values())
    errors = {d: j.error for d, j in failed.items()}
    assert errors["d3"] is not None and errors["d3"].type == "Batch:rate_limit_exceeded"
    assert "HTTP 429: slow down" in errors["d3"].message
    assert errors["d4"] is not None and "I will not grade" in errors["d4"].message


def test_valid_lines_are_read_as_structs_and_a_refused_one_is_decoded_whole_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In one process: the 30 valid replies never reach the dict decoder (the structs' fast
    path), each of the 3 refused ones (grade 7) is decoded whole once, and is stored failed."""
    db, requests = export_pairs(tmp_path, 33)
    results = engine_results(FakeServer(), requests, tmp_path / "res", bad={"3", "13", "23"})
    decoded: list[bytes] = []
    real = adapter.loads

    def counted(raw: bytes) -> Any:
        decoded.append(raw)
        return real(raw)

    monkeypatch.setattr(import_work, "loads", counted)
    summary = import_results(db, results, workers=0)
    assert (summary.ok, summary.failed) == (30, 3)
    assert len(decoded) == 3 and all(b'\\"grade\\": 7' in raw for raw in decoded)
