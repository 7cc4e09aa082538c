"""`relgrade grade` end to end: the lexical judge offline, and LLM judges through the real SDK
against the fake server on a real socket."""

from __future__ import annotations

import collections
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from grader.cli.main import main
from grader.io.judgments import read_judgments
from grader.io.trec import read_qrels
from grader.models import Doc, Query
from grader.store.store import Store
from tests.fakeserver import FakeServer, default_grade, faults
from tests.grade_data import GradeFiles, write_grade_files
from tests.helpers.judgments import stored_judgments


@pytest.fixture
def files(tmp_path: Path) -> GradeFiles:
    return write_grade_files(tmp_path)


def test_lexical_grades_offline_and_writes_both_outputs(
    files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, qrels = tmp_path / "j.jsonl", tmp_path / "q.txt"
    code = main(
        files.args(
            "--judge", "lexical", "--store", tmp_path / "s.db", "--out", out, "--qrels-out", qrels
        )
    )
    assert code == 0
    judgments = read_judgments(out)
    assert len(judgments) == files.n_pairs and all(j.status == "ok" for j in judgments)
    frame = read_qrels(qrels)
    assert len(frame) == files.n_pairs
    assert sorted(frame["grade"]) == sorted(j.grade for j in judgments if j.grade is not None)
    err = capsys.readouterr().err
    assert f"graded {files.n_pairs}, cached 0, failed 0" in err


def test_lexical_rerun_is_all_cached(
    files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = files.args("--judge", "lexical", "--store", tmp_path / "s.db", "--quiet")
    assert main(args) == 0
    capsys.readouterr()
    assert main(args) == 0
    assert f"graded 0, cached {files.n_pairs}, failed 0" in capsys.readouterr().err


def test_depth_limits_the_pairs(files: GradeFiles, tmp_path: Path) -> None:
    assert main(files.args("--judge", "lexical", "--store", tmp_path / "s.db", "--depth", "2")) == 0
    with Store(tmp_path / "s.db") as store:
        assert store.count() == 6


def test_dry_run_creates_no_store(
    files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        files.args("--judge", "lexical", "--store", tmp_path / "s.db", "--dry-run", "--verbose")
    )
    assert code == 0
    assert not (tmp_path / "s.db").exists()
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == files.n_pairs
    assert f"would send {files.n_pairs} requests" in captured.err
    assert "nothing was sent" in captured.err


def test_missing_key_for_openai_names_the_variable(
    files: GradeFiles,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # OpenAI's own API without a key; any other server gets the placeholder (test_settings.py).
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    url = "https://api.openai.com/v1"
    code = main(files.args("--store", tmp_path / "s.db", "--base-url", url))
    assert code == 2
    assert "OPENAI_API_KEY" in capsys.readouterr().err


def test_lexical_refuses_a_model_flag(files: GradeFiles, tmp_path: Path) -> None:
    assert main(files.args("--judge", "lexical", "--model", "x", "--store", tmp_path / "s")) == 2


# ---- LLM judges through the real SDK against the fake server -------------------------------


@pytest.fixture
def llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-cli")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("RELGRADE_MODEL", raising=False)
    monkeypatch.delenv("RELGRADE_PRICES", raising=False)


def llm_args(files: GradeFiles, server: FakeServer, store: Path, *extra: str | Path) -> list[str]:
    return files.args("--base-url", server.base_url, "--store", store, "--quiet", *extra)


@pytest.mark.usefixtures("llm_env")
def test_rerun_sends_zero_requests(
    fake_server: FakeServer, files: GradeFiles, tmp_path: Path
) -> None:
    out1, out2 = tmp_path / "1.jsonl", tmp_path / "2.jsonl"
    assert main(llm_args(files, fake_server, tmp_path / "s.db", "--out", out1)) == 0
    assert fake_server.counts["requests"] == files.n_pairs
    assert main(llm_args(files, fake_server, tmp_path / "s.db", "--out", out2)) == 0
    assert fake_server.counts["requests"] == files.n_pairs
    assert read_judgments(out1) == read_judgments(out2)


@pytest.mark.slow
@pytest.mark.usefixtures("llm_env")
def test_changing_model_or_prompt_regrades_exactly_the_affected_pairs(
    fake_server: FakeServer, files: GradeFiles, tmp_path: Path
) -> None:
    store = tmp_path / "s.db"
    n = files.n_pairs
    assert main(llm_args(files, fake_server, store, "--model", "gpt-4o-mini", "--depth", "2")) == 0
    assert fake_server.counts["requests"] == 6
    # Deeper: only the new pairs are sent.
    assert main(llm_args(files, fake_server, store, "--model", "gpt-4o-mini")) == 0
    assert fake_server.counts["requests"] == n
    # A second model: every pair once more, for that model only.
    out = tmp_path / "ens.jsonl"
    args = llm_args(files, fake_server, store, "--model", "gpt-4o-mini", "--model", "gpt-4o")
    assert main([*args, "--out", str(out)]) == 0
    assert fake_server.counts["requests"] == 2 * n
    assert {r["model"] for r in fake_server.requests[n:]} == {"gpt-4o"}
    ensemble = read_judgments(out)
    assert all(j.judges is not None and len(j.judges) == 2 for j in ensemble)
    # Another prompt: every pair again.
    assert main(llm_args(files, fake_server, store, "--model", "gpt-4o", "--prompt", "code")) == 0
    assert fake_server.counts["requests"] == 3 * n
    with Store(store) as s:
        # Three judges' answers per pair, and the ensemble's combined judgment per pair.
        assert s.count() == 4 * n
        stored = {j.key: j for j in stored_judgments(s)}
        assert all(stored[j.key] == j for j in ensemble)


@pytest.mark.slow
@pytest.mark.usefixtures("llm_env")
def test_failed_pairs_exit_1_stay_out_of_qrels_and_are_retried(
    fake_server: FakeServer, files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store, qrels = tmp_path / "s.db", tmp_path / "q.txt"
    fake_server.enqueue(faults.bad_grade(7), faults.refusal())
    args = llm_args(
        files, fake_server, store, "--max-attempts", "1", "--concurrency", "1", "--qrels-out", qrels
    )
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "failed 2" in err and "rerunning the same command retries them" in err
    assert len(read_qrels(qrels)) == files.n_pairs - 2
    with Store(store) as s:
        failed = list(stored_judgments(s, status="failed"))
        assert len(failed) == 2 and all(j.grade is None for j in failed)
    assert main(args) == 0
    assert fake_server.counts["requests"] == files.n_pairs + 2
    assert len(read_qrels(qrels)) == files.n_pairs


@pytest.mark.usefixtures("llm_env")
def test_max_cost_stops_before_spending_more(
    fake_server: FakeServer, files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from grader.cost import PriceTable
    from grader.judges.llm.judge import LLMJudge
    from grader.prompts import load_prompt

    judge = LLMJudge(
        model="gpt-4o-mini",
        prompt=load_prompt("passage"),
        base_url=fake_server.base_url,
        api_key="sk-test-cli",
        prices=PriceTable.from_files(),
    )
    per_pair = max(
        judge.estimate_cost(
            Query(query_id="q", text=f"cache eviction {i}"), Doc(doc_id="d", text="x" * 60)
        )
        or 0.0
        for i in range(3)
    )
    budget = 3.5 * per_pair
    store = tmp_path / "s.db"
    args = llm_args(files, fake_server, store, "--model", "gpt-4o-mini", "--max-cost", f"{budget}")
    assert main([*args, "--concurrency", "2"]) == 3
    err = capsys.readouterr().err
    assert "--max-cost" in err and "left" in err
    sent = fake_server.counts["requests"]
    assert 1 <= sent < files.n_pairs
    with Store(store) as s:
        spent = sum(j.cost or 0.0 for j in stored_judgments(s))
        assert s.count() == sent
    assert spent <= budget


@pytest.mark.usefixtures("llm_env")
def test_dry_run_sends_nothing_and_estimates(
    fake_server: FakeServer, files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s.db"
    assert main(llm_args(files, fake_server, store, "--depth", "1")) == 0
    capsys.readouterr()
    assert main(llm_args(files, fake_server, store, "--dry-run", "--verbose")) == 0
    assert fake_server.counts["requests"] == 3
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == files.n_pairs - 3
    assert "answers already stored: 3 ok" in captured.err
    assert f"would send {files.n_pairs - 3} requests" in captured.err
    assert "estimated cost $" in captured.err


@pytest.mark.usefixtures("llm_env")
def test_verify_low_needs_a_different_judge(
    fake_server: FakeServer, files: GradeFiles, tmp_path: Path
) -> None:
    assert main(llm_args(files, fake_server, tmp_path / "s.db", "--verify-low")) == 2
    assert fake_server.counts["requests"] == 0


def _verifier_answers(grade: int) -> Callable[[dict[str, Any]], int]:
    """A grade function: the verifier (gpt-4o) always says `grade`; the first judge hashes."""

    def grade_fn(body: dict[str, Any]) -> int:
        return grade if body.get("model") == "gpt-4o" else default_grade(body)

    return grade_fn


@pytest.mark.slow
@pytest.mark.usefixtures("llm_env")
def test_verify_low_regrades_only_low_pairs_and_the_verifier_grade_is_final(
    fake_server: FakeServer, files: GradeFiles, tmp_path: Path
) -> None:
    fake_server.grade_fn = _verifier_answers(3)
    out = tmp_path / "v.jsonl"
    args = llm_args(
        files, fake_server, tmp_path / "s.db", "--verify-low", "--verify-model", "gpt-4o"
    )
    assert main([*args, "--out", str(out)]) == 0
    judgments = read_judgments(out)
    verified = [j for j in judgments if j.verification is not None]
    unverified = [j for j in judgments if j.verification is None]
    assert verified and unverified
    assert all(j.grade is not None and j.grade >= 2 for j in unverified)
    assert fake_server.counts["requests"] == files.n_pairs + len(verified)
    # a pair's verification may start before the first judge has answered every other pair
    models = collections.Counter(r["model"] for r in fake_server.requests)
    assert models == {"gpt-4o-mini": files.n_pairs, "gpt-4o": len(verified)}
    for j in verified:
        assert j.verification is not None
        assert j.verification["primary"]["grade"] <= 1
        assert j.verification["verifier"]["grade"] == 3
        assert j.grade == 3  # the verifier answered: its grade is final
    # The final judgments are stored under their own keys; a rerun sends nothing.
    with Store(tmp_path / "s.db") as store:
        stored = store.get_many(j.key for j in judgments)
    assert [stored[j.key] for j in judgments] == judgments
    again = tmp_path / "again.jsonl"
    assert main([*args, "--out", str(again)]) == 0
    assert fake_server.counts["requests"] == files.n_pairs + len(verified)
    assert read_judgments(again) == judgments


@pytest.mark.slow
@pytest.mark.usefixtures("llm_env")
def test_verify_low_with_a_failing_verifier_keeps_the_first_grade(
    fake_server: FakeServer, files: GradeFiles, tmp_path: Path
) -> None:
    fake_server.grade_fn = _verifier_answers(7)  # out of range: re-asked, then failed
    out, qrels = tmp_path / "v.jsonl", tmp_path / "q.txt"
    args = llm_args(
        files, fake_server, tmp_path / "s.db", "--verify-low", "--verify-model", "gpt-4o",
        "--max-attempts", "2", "--out", out, "--qrels-out", qrels,
    )  # fmt: skip
    assert main(args) == 0  # every pair has a grade: the first one stands
    judgments = read_judgments(out)
    verified = [j for j in judgments if j.verification is not None]
    assert verified
    for j in verified:
        assert j.verification is not None
        first, second = j.verification["primary"], j.verification["verifier"]
        assert j.status == "ok" and j.grade == first["grade"] <= 1
        assert second["status"] == "failed" and second["grade"] is None
        assert second["error"] is not None and second["error"]["type"]
    assert len(read_qrels(qrels)) == files.n_pairs
    with Store(tmp_path / "s.db") as store:
        failed = list(stored_judgments(store, status="failed"))
    assert len(failed) == len(verified) and all(f.judge.endswith("gpt-4o") for f in failed)


def test_dry_run_needs_no_key(
    files: GradeFiles,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    code = main(
        files.args("--store", tmp_path / "s.db", "--model", "gpt-4o-mini", "gpt-4o", "--dry-run")
    )
    assert code == 0
    err = capsys.readouterr().err
    assert f"would send {2 * files.n_pairs} requests" in err and "estimated cost $" in err


@pytest.mark.usefixtures("llm_env")
@pytest.mark.parametrize("flag", ["--out", "--qrels-out", "--store"])
def test_missing_output_folder_is_refused_before_grading(
    fake_server: FakeServer,
    files: GradeFiles,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    flag: str,
) -> None:
    store = tmp_path / "s.db"
    args = files.args("--base-url", fake_server.base_url, "--quiet")
    if flag != "--store":
        args = [*args, "--store", str(store)]
    code = main([*args, flag, str(tmp_path / "nonexistent" / "x.txt")])
    assert code == 2
    assert fake_server.counts["requests"] == 0  # nothing graded, nothing paid
    assert not store.exists()
    assert "nonexistent" in capsys.readouterr().err


@pytest.mark.usefixtures("llm_env")
def test_a_model_without_a_price_reports_cost_unknown_not_zero(
    fake_server: FakeServer, files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "s.db"
    assert main(llm_args(files, fake_server, store, "--model", "llama3-zz")) == 0
    summary = capsys.readouterr().err
    assert f"unknown for {files.n_pairs} request(s)" in summary
    assert "cost $0.0000" not in summary
    assert main(llm_args(files, fake_server, store, "--model", "gpt-4o-mini", "--depth", "1")) == 0
    assert "unknown" not in capsys.readouterr().err  # a priced model shows dollars


def test_summary_says_how_many_cached_answers_another_process_paid_for() -> None:
    from grader.grading.report import GradingReport
    from grader.job.summary import summary_line

    report = GradingReport()
    report.cached, report.adopted = 5, 3
    line = summary_line(report)
    assert line.startswith("graded 0, cached 5, failed 0, ")
    assert line.endswith(
        "; 3 answers were paid by another process sharing the store "
        "during this run (taken from the store, not paid again)"
    )
    report.adopted = 0
    assert "another process" not in summary_line(report)
