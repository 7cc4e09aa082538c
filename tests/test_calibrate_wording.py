"""What `calibrate` says about its figures: a weighted confusion matrix's cells are estimated
pairs, each measure gets its own system-ranking section, and partly graded whole queries say why
runs have no interval."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from grader.cli.main import main
from tests.helpers.judgments import write_judgments
from tests.helpers.sampling import population

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


def lexical_judgments(tmp_path: Path, runs: list[str]) -> Path:
    """The lexical judge's judgments of the code-search examples' `runs` (a JSONL file)."""
    llm = tmp_path / "llm.jsonl"
    argv = ["grade", "--queries", str(EXAMPLES / "queries.tsv"), "--docs"]
    argv += [str(EXAMPLES / "docs.jsonl"), "--run", *runs, "--judge", "lexical"]
    assert main([*argv, "--store", str(tmp_path / "s.db"), "--out", str(llm), "--quiet"]) == 0
    return llm


@pytest.mark.slow
def test_several_measures_get_their_own_system_ranking_sections(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = [str(EXAMPLES / "run.bm25.txt"), str(EXAMPLES / "run.weak.txt")]
    llm = lexical_judgments(tmp_path, runs)
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


@pytest.mark.slow
def test_partly_graded_whole_queries_say_why_runs_have_no_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runs = [str(EXAMPLES / "run.bm25.txt"), str(EXAMPLES / "run.weak.txt")]
    llm = lexical_judgments(tmp_path, runs)
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
