"""`grade --no-logprobs`: the requests ask for no logprobs whatever the prompt file says, the
judgments carry no grade distribution, the content keys differ from a run with them (a rerun with
logprobs asks again), and `sample --strategy uncertainty / active` say that the judgments carry
no distribution rather than drawing as if they did."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.cli.main import main
from grader.io.judgments import read_judgments
from grader.prompts import load_prompt
from tests.fakeserver import FakeServer
from tests.grade_data import GradeFiles, write_grade_files


@pytest.fixture
def files(tmp_path: Path) -> GradeFiles:
    return write_grade_files(tmp_path, n_queries=3, depth=4)


def _grade(files: GradeFiles, server: FakeServer, tmp_path: Path, out: str, *extra: str) -> int:
    args = files.args("--base-url", server.base_url, "--store", tmp_path / "s.db", "--quiet")
    return main([*args, "--out", str(tmp_path / out), *extra])


def test_no_logprobs_sends_none_and_keeps_no_distribution(
    fake_server: FakeServer, files: GradeFiles, tmp_path: Path
) -> None:
    assert load_prompt("passage-v1").logprobs  # the prompt file asks for them
    assert _grade(files, fake_server, tmp_path, "off.jsonl", "--no-logprobs") == 0
    assert len(fake_server.requests) == files.n_pairs
    assert not any(body.get("logprobs") for body in fake_server.requests)
    assert not any("top_logprobs" in body for body in fake_server.requests)
    off = read_judgments(tmp_path / "off.jsonl")
    assert all(j.status == "ok" and j.distribution is None for j in off)

    # the same command again: every pair from the store
    assert _grade(files, fake_server, tmp_path, "again.jsonl", "--no-logprobs") == 0
    assert len(fake_server.requests) == files.n_pairs

    # with the prompt's logprobs: another request per pair, each with a distribution
    assert _grade(files, fake_server, tmp_path, "on.jsonl") == 0
    asked = fake_server.requests[files.n_pairs :]
    assert len(asked) == files.n_pairs and all(body["logprobs"] is True for body in asked)
    on = read_judgments(tmp_path / "on.jsonl")
    assert all(j.distribution is not None for j in on)
    assert {(j.query_id, j.doc_id): j.grade for j in on} == {
        (j.query_id, j.doc_id): j.grade for j in off
    }


def test_without_logprobs_keeps_the_prompt_text_and_changes_the_sampling() -> None:
    spec = load_prompt("passage-v1")
    off = spec.without_logprobs()
    assert (off.sha256, off.system, off.user) == (spec.sha256, spec.system, spec.user)
    assert off.sampling()["logprobs"] is False and off.sampling()["top_logprobs"] == 0
    assert spec.sampling()["logprobs"] is True
    assert off.without_logprobs() is off


def _sample(files: GradeFiles, judgments: Path, out: Path, strategy: str) -> int:
    argv = ["sample", "--judgments", str(judgments), "--queries", str(files.queries)]
    argv += ["--docs", str(files.docs), "--n", "4", "--strategy", strategy, "--seed", "1"]
    return main([*argv, "--out", str(out)])


def test_sample_says_when_the_judgments_carry_no_distribution(
    fake_server: FakeServer,
    files: GradeFiles,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _grade(files, fake_server, tmp_path, "off.jsonl", "--no-logprobs") == 0
    capsys.readouterr()
    assert _sample(files, tmp_path / "off.jsonl", tmp_path / "active.csv", "active") == 0
    said = capsys.readouterr().out
    assert "no judgment carries a grade distribution" in said
    assert "--no-logprobs" in said

    assert _sample(files, tmp_path / "off.jsonl", tmp_path / "unc.csv", "uncertainty") == 2
    err = capsys.readouterr().err
    assert "needs a logprob distribution" in err and "--no-logprobs" in err

    assert _grade(files, fake_server, tmp_path, "on.jsonl") == 0
    capsys.readouterr()
    assert _sample(files, tmp_path / "on.jsonl", tmp_path / "active2.csv", "active") == 0
    said = capsys.readouterr().out
    assert "uncertainty from grade distribution" in said
    assert "no judgment carries a grade distribution" not in said
