"""Under load through the real llama.cpp server (issue 37): 20 pairs (the examples' top 5 per
query) at concurrency 2 on a busy machine, at least 18 graded, and an unchanged rerun that sends
no request for a graded pair. Without logprobs (`--no-logprobs`, the cheap way to grade on
llama-cpp-python's server): no judgment carries a distribution.
Started by `.ci/real_server.sh` like tests/test_real_server.py; skips without the server."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.cli.main import main
from grader.io.judgments import read_judgments
from grader.judges.failures import failure_cause
from tests.helpers.real_server import (
    calls_logged,
    grade_args,
    keys_called_after,
    keys_without_grade,
    real_server,
)

SERVER = real_server()
pytestmark = [
    pytest.mark.real_server,
    pytest.mark.skipif(SERVER is None, reason="no real server (RELGRADE_REAL_SERVER_URL unset)"),
]


def test_twenty_pairs_at_concurrency_two_then_a_free_rerun(tmp_path: Path) -> None:
    assert SERVER is not None
    db, out = tmp_path / "store.db", tmp_path / "judgments.jsonl"
    args = grade_args(
        SERVER, tmp_path, "--store", str(db), "--out", str(out), "--no-logprobs", depth="5"
    )
    assert main(args) in (0, 1)
    judgments = read_judgments(out)
    assert len(judgments) == 20
    ok = [j for j in judgments if j.status == "ok"]
    assert len(ok) >= 18, [failure_cause(j.error) for j in judgments if j.status != "ok"]
    assert all(j.distribution is None for j in ok)

    failed = keys_without_grade(db)
    before = calls_logged(db)
    rerun = tmp_path / "rerun.jsonl"
    assert main([*args[: args.index("--out")], "--out", str(rerun), "--no-logprobs"]) in (0, 1)
    called = keys_called_after(db, before)
    assert called <= failed  # only a pair that failed is asked again
    if not failed:
        assert calls_logged(db) == before  # nothing failed: not one request
    again = {(j.query_id, j.doc_id): j.grade for j in read_judgments(rerun)}
    assert all(again[(j.query_id, j.doc_id)] == j.grade for j in ok)
