"""The spending figures `grade` and `regrade` print, through the command line: the dry run's
expected cost beside its ceiling, --max-cost reserving the ceiling, and an ensemble's answers
counted per judge."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.prompts import load_prompt
from grader.store.store import Store
from tests.fakeserver import FakeServer
from tests.grade_data import GradeFiles, write_grade_files
from tests.helpers.judgments import stored_judgments

PRICES = """\
[models."judge-a"]
input = 1000.0
output = 10000.0

[models."judge-b"]
input = 1000.0
output = 10000.0
"""


def _grade_args(files: GradeFiles, server: FakeServer, folder: Path, *extra: str) -> list[str]:
    prices = folder / "prices.toml"
    prices.write_text(PRICES)
    base = ["--base-url", server.base_url, "--store", str(folder / "s.db"), "--quiet"]
    return files.args(*base, "--prices", str(prices), *extra)


def _dry_run_figures(err: str) -> dict[str, float]:
    """The completion tokens and costs a grade dry run printed, as numbers."""
    tokens = re.search(r"completion tokens about ([\d,]+) expected, at most ([\d,]+)", err)
    cost = re.search(r"estimated cost \$([\d.]+) expected \(at most \$([\d.]+)\)", err)
    assert tokens and cost, err
    return {
        "tokens": float(tokens[1].replace(",", "")),
        "tokens_ceiling": float(tokens[2].replace(",", "")),
        "cost": float(cost[1]),
        "cost_ceiling": float(cost[2]),
    }


def _spent(err: str) -> tuple[int, float]:
    """(completion tokens, USD) a grade summary line says were used."""
    found = re.search(r"completion ([\d,]+), cached [\d,]+\), cost \$([\d.]+)", err)
    assert found, err
    return int(found[1].replace(",", "")), float(found[2])


@pytest.mark.slow
@pytest.mark.usefixtures("llm_env")
def test_dry_run_shows_the_expected_cost_and_the_ceiling_apart(
    fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_grade_files(tmp_path)  # 12 pairs
    args = _grade_args(files, fake_server, tmp_path, "--model", "judge-a")
    max_tokens = load_prompt("passage").max_tokens

    # Nothing stored yet: the expectation is the reply the schema asks for, far below the ceiling.
    assert main([*args, "--dry-run"]) == 0
    err = capsys.readouterr().err
    first = _dry_run_figures(err)
    assert first["tokens_ceiling"] == files.n_pairs * max_tokens
    assert first["tokens"] < first["tokens_ceiling"] / 3
    assert "a grade and a short reason as the reply schema of passage@1 asks" in err
    assert "no stored replies of it yet" in err
    assert "--max-cost reserves the ceiling" in err

    # Half graded: the expectation becomes the median of the stored replies of that prompt.
    assert main([*args, "--depth", "2"]) == 0
    capsys.readouterr()
    with Store(tmp_path / "s.db") as store:
        stored = [j.usage.completion_tokens for j in stored_judgments(store, status="ok")]
    median = statistics.median(stored)
    assert main([*args, "--dry-run"]) == 0
    err = capsys.readouterr().err
    second = _dry_run_figures(err)
    left = files.n_pairs - len(stored)
    assert second["tokens"] == left * median
    assert second["tokens_ceiling"] == left * max_tokens
    assert f"the median of {len(stored)} stored replies of passage@1" in err

    # The run itself uses what was expected, not the ceiling.
    assert main(args) == 0
    completion, cost = _spent(capsys.readouterr().err)
    assert completion == second["tokens"]
    assert cost == pytest.approx(second["cost"], rel=0.05)
    assert second["cost_ceiling"] > 3 * cost


@pytest.mark.slow
@pytest.mark.usefixtures("llm_env")
def test_max_cost_keeps_reserving_the_ceiling(
    fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_grade_files(tmp_path)
    args = _grade_args(files, fake_server, tmp_path, "--model", "judge-a", "--concurrency", "1")
    assert main([*args, "--depth", "2"]) == 0  # stored replies: the expectation is exact
    capsys.readouterr()
    assert main([*args, "--dry-run"]) == 0
    figures = _dry_run_figures(capsys.readouterr().err)
    sent_before = fake_server.counts["requests"]
    # A budget well above the expected cost of the 6 pairs left but below their ceiling stops
    # early: each request's ceiling is reserved before it is sent.
    budget = 1.5 * figures["cost"]
    assert budget < figures["cost_ceiling"]
    assert main([*args, "--max-cost", f"{budget:.4f}"]) == 3
    err = capsys.readouterr().err
    assert "stopped before exceeding --max-cost" in err
    sent = fake_server.counts["requests"] - sent_before
    per_request_ceiling = figures["cost_ceiling"] / 6
    assert 1 <= sent < 6
    assert _spent(err)[1] + per_request_ceiling > budget  # the next ceiling did not fit


@pytest.mark.slow
@pytest.mark.usefixtures("llm_env")
def test_ensemble_summary_counts_answers_per_judge(
    fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_grade_files(tmp_path)
    one = _grade_args(files, fake_server, tmp_path, "--model", "judge-a")
    assert main(one) == 0
    err = capsys.readouterr().err
    assert f"graded {files.n_pairs}, cached 0, failed 0," in err  # one judge: no breakdown
    assert "answers asked" not in err
    sent = fake_server.counts["requests"]

    both = _grade_args(files, fake_server, tmp_path, "--model", "judge-a", "judge-b")
    assert main(both) == 0
    err = capsys.readouterr().err
    n = files.n_pairs
    assert (
        f"graded {n} (answers asked: openai:judge-a 0, openai:judge-b {n}), "
        f"cached 0 (answers stored: openai:judge-a {n}, openai:judge-b 0), failed 0," in err
    )
    assert fake_server.counts["requests"] - sent == n

    assert main(both) == 0  # a rerun: every pair and answer from the store
    err = capsys.readouterr().err
    assert (
        f"graded 0 (answers asked: openai:judge-a 0, openai:judge-b 0), "
        f"cached {n} (answers stored: openai:judge-a {n}, openai:judge-b {n}), failed 0," in err
    )


@pytest.mark.slow
@pytest.mark.usefixtures("llm_env")
def test_regrade_dry_run_shows_the_expected_cost_and_the_ceiling_apart(
    fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_grade_files(tmp_path)
    assert main(_grade_args(files, fake_server, tmp_path, "--model", "judge-a")) == 0
    prices = str(tmp_path / "prices.toml")
    regrade = ["regrade", "--store", str(tmp_path / "s.db"), "--base-url", fake_server.base_url]
    regrade += ["--model", "judge-b", "--prices", prices]
    capsys.readouterr()

    first = ["--select", "sample", str(_first_query(files, tmp_path)), "--format", "json"]
    assert main([*regrade, *first]) == 0
    spent_first = json.loads(capsys.readouterr().out)["cost"]
    with Store(tmp_path / "s.db") as store:
        stored = [
            j.usage.completion_tokens
            for j in stored_judgments(store, status="ok", judge="openai:judge-b")
        ]
    assert main([*regrade, "--dry-run"]) == 0
    err = capsys.readouterr().err
    found = re.search(
        r"estimated \$([\d.]+) expected \(at most \$([\d.]+)\) live, "
        r"\$([\d.]+) expected \(at most \$([\d.]+)\) by batch",
        err,
    )
    assert found, err
    expected_live, ceiling_live = float(found[1]), float(found[2])
    assert float(found[3]) == pytest.approx(expected_live / 2, abs=1e-4)  # the batch discount
    assert f"the median of {len(stored)} stored replies of passage@1" in err
    assert "every reply at the prompt's max_tokens (the ceiling)" in err

    assert main([*regrade, "--format", "json"]) == 0
    spent = json.loads(capsys.readouterr().out)["cost"] - spent_first  # the diff covers all
    assert spent == pytest.approx(expected_live, rel=0.05)
    assert ceiling_live > 3 * spent


def _first_query(files: GradeFiles, folder: Path) -> Path:
    """A sample file holding the pairs of the run's first query."""
    lines = [line.split() for line in files.run.read_text().splitlines()]
    sample = folder / "first.csv"
    rows = [f"{qid},{did}" for qid, _, did, *_ in lines if qid == "q0"]
    sample.write_text("query_id,doc_id\n" + "\n".join(rows) + "\n")
    return sample
