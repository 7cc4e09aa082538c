"""Numbers the user reads are the numbers that happen (issue 13, section 4), each through the
command line: the dry run's expected cost beside its ceiling, per-judge counts of an ensemble,
the weighted confusion matrix labelled, and the small wordings."""

from __future__ import annotations

import csv
import json
import re
import statistics
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.io.judgments import write_judgments
from grader.prompts import load_prompt
from grader.store.store import Store
from tests.batch_helpers import new_prompt, seed_store
from tests.fake_batch import BatchPlan, FakeBatchAPI
from tests.fakeserver import FakeServer
from tests.grade_data import GradeFiles, write_grade_files
from tests.helpers.sampling import population

PRICES = """\
[models."judge-a"]
input = 1000.0
output = 10000.0

[models."judge-b"]
input = 1000.0
output = 10000.0
"""


@pytest.fixture
def llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-numbers")
    for name in ("OPENAI_BASE_URL", "RELGRADE_MODEL", "RELGRADE_PRICES"):
        monkeypatch.delenv(name, raising=False)


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
        stored = [j.usage.completion_tokens for j in store.iter_judgments(status="ok")]
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
            for j in store.iter_judgments(status="ok", judge="openai:judge-b")
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


# The calibration report -----------------------------------------------------------------------

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "code-search"


def _weighted_sample(tmp_path: Path) -> tuple[Path, Path]:
    """A stratified sample of 12 of 76 judgments, graded and imported with its manifest;
    returns (judgments, human grades)."""
    judgments = tmp_path / "j.jsonl"
    write_judgments(judgments, population({0: 40, 1: 20, 2: 10, 3: 6}, queries=4))
    out = tmp_path / "sample.csv"
    argv = ["sample", "--judgments", str(judgments), "--n", "12", "--strategy", "stratified"]
    assert main([*argv, "--seed", "4", "--out", str(out)]) == 0
    with out.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    filled = tmp_path / "filled.csv"
    with filled.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows([{**row, "grade": str(i % 4)} for i, row in enumerate(rows)])
    human = tmp_path / "human.csv"
    manifest = str(tmp_path / "sample.manifest.json")
    assert (
        main(["sample", "--import", str(filled), "--manifest", manifest, "--out", str(human)]) == 0
    )
    return judgments, human


@pytest.mark.slow
def test_a_weighted_confusion_matrix_says_its_cells_are_estimated_pairs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    judgments, human = _weighted_sample(tmp_path)
    base = ["calibrate", "--llm", str(judgments), "--human", str(human), "--bootstrap", "0"]
    capsys.readouterr()
    assert main([*base, "--format", "json"]) == 0
    confusion = json.loads(capsys.readouterr().out)["confusion"]
    # 12 pairs were graded, but the weighted cells add up to the 76 pairs they stand for.
    assert sum(map(sum, confusion)) == pytest.approx(76)

    report = tmp_path / "report.html"
    assert main([*base, "--format", "table", "--report", str(report)]) == 0
    table = " ".join(capsys.readouterr().out.split())  # rich wraps titles
    label = "cells: estimated pairs (weighted by the sample manifest, 1/pi)"
    assert f"Confusion (rows human, columns LLM; {label})" in table
    page = report.read_text(encoding="utf-8")
    assert f"Confusion: rows human grade, columns LLM grade; {label}</caption>" in page
    assert f"Confusion matrix; {label}</figcaption>" in page

    assert main([*base, "--no-manifest", "--format", "table", "--report", str(report)]) == 0
    assert "estimated pairs" not in capsys.readouterr().out + report.read_text(encoding="utf-8")


@pytest.mark.slow
def test_several_measures_get_their_own_system_ranking_sections(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = [str(EXAMPLES / "run.bm25.txt"), str(EXAMPLES / "run.weak.txt")]
    llm = tmp_path / "llm.jsonl"
    argv = ["grade", "--queries", str(EXAMPLES / "queries.tsv"), "--docs"]
    argv += [str(EXAMPLES / "docs.jsonl"), "--run", *runs, "--judge", "lexical"]
    assert main([*argv, "--store", str(tmp_path / "s.db"), "--out", str(llm), "--quiet"]) == 0
    report = tmp_path / "report.html"
    argv = ["calibrate", "--llm", str(llm), "--human", str(EXAMPLES / "human.csv")]
    argv += ["--run", *runs, "-m", "nDCG@10", "P(rel=2)@10", "--bootstrap", "0"]
    assert main([*argv, "--report", str(report), "--format", "json"]) == 0
    capsys.readouterr()
    page = report.read_text(encoding="utf-8")
    assert page.count("<h2>System ranking (") == 2
    assert "<h2>System ranking (nDCG@10)</h2>" in page
    assert "<h2>System ranking (P(rel=2)@10)</h2>" in page
    outside_charts = re.sub(r"<svg.*?</svg>", "", page, flags=re.S)  # matplotlib's own ids
    ids = re.findall(r'id="([^"]+)"', outside_charts)
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    # The first measure keeps the plain ids; the second's name its measure.
    assert {"systems", "systems-chart", "kendall_tau"} <= set(ids)
    assert {"systems-P-rel-2-10", "systems-chart-P-rel-2-10", "kendall_tau-P-rel-2-10"} <= set(ids)


# Small things ---------------------------------------------------------------------------------


@pytest.mark.usefixtures("llm_env")
def test_diff_html_with_nothing_changed_says_so_and_has_a_page_margin(
    fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_grade_files(tmp_path)
    assert main(_grade_args(files, fake_server, tmp_path, "--model", "judge-a")) == 0
    report = tmp_path / "diff.html"
    argv = ["regrade", "--store", str(tmp_path / "s.db"), "--base-url", fake_server.base_url]
    # The fake server's grade depends on the prompt's text only: another model changes nothing.
    argv += ["--model", "judge-b", "--report", str(report), "--quiet"]
    assert main(argv) == 0
    capsys.readouterr()
    page = report.read_text(encoding="utf-8")
    n = files.n_pairs
    assert '<span id="changed">0</span> changed' in page
    assert f"No pair of the {n} graded ok in both versions changed its grade." in page
    assert "<tbody></tbody>" not in page  # no empty table under "Changed pairs"
    body_rule = re.search(r"body \{([^}]*)\}", page)
    assert body_rule and "padding: 0 1.5em" in body_rule[1]  # a margin in a narrow window


def test_many_strata_of_one_size_are_worded_as_such(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    judgments = tmp_path / "j.jsonl"
    write_judgments(judgments, population({0: 100, 1: 60, 2: 30, 3: 10}, queries=20))
    argv = ["sample", "--judgments", str(judgments), "--n", "50", "--strategy", "whole-queries"]
    assert main([*argv, "--seed", "1", "--out", str(tmp_path / "s.csv")]) == 0
    assert "  20 strata of 10 pairs each; pairs drawn from 5 of them" in capsys.readouterr().out


def test_one_collected_batch_is_one_batch(
    llm_env: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    seed_store(db, 6)
    prompt = new_prompt(tmp_path).source
    with FakeServer() as server:
        api = FakeBatchAPI(server)
        url = server.base_url
        argv = ["regrade", "--store", str(db), "--prompt", str(prompt), "--model", "fake-model"]
        argv += ["--base-url", url, "--poll-interval", "0", "--quiet", "--batch"]
        api.plan(BatchPlan(polls_in_progress=2))  # still running when --no-wait returns
        assert main([*argv, "--no-wait"]) == 0
        capsys.readouterr()
        collect = ["batch", "collect", "--store", str(db), "--base-url", url]
        assert main([*collect, "--poll-interval", "0"]) == 0
        err = capsys.readouterr().err
        assert "collected 1 batch (6 pairs)" in err and "batches" not in err

        db2 = tmp_path / "s2.db"
        seed_store(db2, 6)
        argv[2] = str(db2)
        argv.remove("--quiet")
        assert main(argv) == 0  # waits for its batch, then says what it collected
        said = capsys.readouterr()
        assert "; collected 1 batch: 6 from the batch" in said.out + said.err


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("q0 Q0 d0 1 2.5 bm25\n".encode("utf-16-le"), "not UTF-8 text: a NUL byte"),
        (b"\x00\x01\x02\x03\n" + bytes(range(256)) * 8, "not UTF-8 text: a NUL byte"),
        (b"PK\x03\x04\x14\x00" + bytes(range(128, 256)) * 8, "not valid UTF-8"),
    ],
    ids=["utf-16", "nul-first-line", "zip"],
)
def test_a_binary_run_is_reported_as_not_utf8(
    content: bytes, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = tmp_path / "run.bin"
    run.write_bytes(content)
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q0 0 d0 1\n")
    files = write_grade_files(tmp_path)
    store = str(tmp_path / "s.db")
    grade = ["grade", "--queries", str(files.queries), "--docs", str(files.docs), "--run"]
    for argv in (["evaluate", str(qrels), str(run)], [*grade, str(run), "--judge", "lexical"]):
        assert main([*argv, "--store", store] if argv[0] == "grade" else argv) == 2
        err = capsys.readouterr().err
        assert f"{run}:1: {said}" in err
        assert "columns" not in err


def test_partly_graded_whole_queries_say_why_runs_have_no_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = [str(EXAMPLES / "run.bm25.txt"), str(EXAMPLES / "run.weak.txt")]
    llm = tmp_path / "llm.jsonl"
    argv = ["grade", "--queries", str(EXAMPLES / "queries.tsv"), "--docs"]
    argv += [str(EXAMPLES / "docs.jsonl"), "--run", *runs, "--judge", "lexical"]
    assert main([*argv, "--store", str(tmp_path / "s.db"), "--out", str(llm), "--quiet"]) == 0
    sample = tmp_path / "sample.csv"
    argv = ["sample", "--judgments", str(llm), "--n", "30", "--strategy", "whole-queries"]
    assert main([*argv, "--seed", "3", "--out", str(sample)]) == 0
    with sample.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    queries = sorted({r["query_id"] for r in rows})
    assert len(queries) >= 2

    def calibrate(keep_whole: set[str]) -> dict[str, object]:
        """People grade every pair of the queries in `keep_whole`, all but one of the others."""
        dropped = {q for q in queries if q not in keep_whole}
        filled = tmp_path / "filled.csv"
        with filled.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            for i, row in enumerate(rows):
                if row["query_id"] in dropped:
                    dropped.discard(row["query_id"])  # the query's first pair stays ungraded
                    continue
                writer.writerow({**row, "grade": str(i % 4)})
        human = tmp_path / "human.csv"
        argv = [
            "sample",
            "--import",
            str(filled),
            "--manifest",
            str(tmp_path / "sample.manifest.json"),
        ]
        assert main([*argv, "--out", str(human), "--allow-missing"]) == 0
        argv = ["calibrate", "--llm", str(llm), "--human", str(human), "--run", *runs]
        argv += ["-m", "nDCG@10", "--bootstrap", "0", "--format", "json"]
        capsys.readouterr()
        assert main(argv) == 0
        out: dict[str, object] = json.loads(capsys.readouterr().out)
        return out

    partly = len(queries)
    result = calibrate(set())  # every sampled query partly graded
    for run in result["estimates"]["runs"].values():  # type: ignore[index]
        assert run["ppi"] is None and run["ppi_ci"] is None
        assert run["caution"].startswith(
            f"LLM-only: none of the {partly} sampled queries is wholly"
        )
    said = " ".join(result["notes"])  # type: ignore[arg-type]
    assert "grade the rest of their pairs" in said
    assert "draw the sample with" not in said  # it was drawn so

    result = calibrate({queries[0]})  # one wholly graded, the rest partly: no interval
    for run in result["estimates"]["runs"].values():  # type: ignore[index]
        assert run["ppi"] is not None and run["ppi_ci"] == [None, None]
        assert "no interval: it needs at least 2 graded queries" in run["caution"]
        assert f"{partly - 1} queries of the sample are only partly graded" in run["caution"]
