"""`calibrate` on what people hand it: human grades as judgments JSONL (like the LLM side), the
systems table saying which pairs it scores on, and a sample of pairs drawn one by one, which
ranks no system (the section says why, as the per-run estimates do)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from grader.cli.main import main
from grader.models import Judgment, JudgmentError
from tests.helpers.judgments import write_judgments

Rows = list[tuple[str, str, int]]


def _grades(seed: int = 7, n_queries: int = 10, per_query: int = 12) -> tuple[Rows, Rows]:
    rng = np.random.default_rng(seed)
    human: Rows = []
    llm: Rows = []
    for q in range(n_queries):
        for d in range(per_query):
            h = int(rng.integers(0, 4))
            m = int(np.clip(h + rng.integers(-1, 2), 0, 3))
            human.append((f"q{q}", f"d{q}_{d}", h))
            llm.append((f"q{q}", f"d{q}_{d}", m))
    return human, llm


def _judgments(path: Path, rows: Rows, judge: str, failed: int = 0) -> Path:
    ok = [
        Judgment(query_id=q, doc_id=d, grade=g, status="ok", judge=judge, key=f"{judge}:{q}:{d}")
        for q, d, g in rows
    ]
    bad = [
        Judgment(
            query_id="qx",
            doc_id=f"bad{i}",
            status="failed",
            judge=judge,
            key=f"{judge}:bad{i}",
            error=JudgmentError(type="InvalidReply", message="no grade"),
        )
        for i in range(failed)
    ]
    write_judgments(path, [*ok, *bad])
    return path


def _qrels(path: Path, rows: Rows) -> Path:
    path.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in rows))
    return path


def _runs(folder: Path, rows: Rows, n: int = 4) -> list[str]:
    rng = np.random.default_rng(3)
    paths = []
    for r in range(n):
        path = folder / f"run{r}.txt"
        lines = [f"{q} Q0 {d} 1 {rng.random():.6f} run{r}\n" for q, d, _ in rows]
        path.write_text("".join(lines))
        paths.append(str(path))
    return paths


def _calibrate(capsys: pytest.CaptureFixture[str], argv: list[str], fmt: str) -> Any:
    code = main(["calibrate", *argv, "--bootstrap", "50", "--format", fmt])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out) if fmt == "json" else captured.out


def test_human_grades_as_judgments_jsonl_are_read_like_the_llm_side(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    human, llm = _grades()
    hp = _judgments(tmp_path / "human.jsonl", human, "human:ann", failed=2)
    lp = _judgments(tmp_path / "llm.jsonl", llm, "openai:m")
    out = _calibrate(capsys, ["--llm", str(lp), "--human", str(hp)], "json")
    assert out["n"] == len(human)
    h, m = [g for *_, g in human], [g for *_, g in llm]
    assert out["cohen_kappa"] == pytest.approx(cohen_kappa_score(h, m))
    assert any("2 failed judgments in --human were left out" in n for n in out["notes"])


def test_the_systems_table_says_it_scores_the_pairs_both_sides_graded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    human, llm = _grades()
    argv = ["--llm", str(_qrels(tmp_path / "llm.qrels", llm))]
    argv += ["--human", str(_qrels(tmp_path / "human.qrels", human))]
    for run in _runs(tmp_path, llm):
        argv += ["--run", run]
    text = " ".join(_calibrate(capsys, argv, "table").split())
    assert "Systems by nDCG@10, scored on the pairs graded on both sides only" in text


def _sampled(tmp_path: Path, human: Rows, llm: Rows, keep: Rows) -> list[str]:
    argv = ["--llm", str(_qrels(tmp_path / "llm.qrels", llm))]
    argv += ["--human", str(_qrels(tmp_path / "human.qrels", keep)), "--no-manifest"]
    for run in _runs(tmp_path, llm):
        argv += ["--run", run]
    return argv


@pytest.mark.slow
def test_a_pair_sample_ranks_no_system_and_says_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    human, llm = _grades()
    scattered = human[::5]  # a few pairs of every query: a pair design
    argv = _sampled(tmp_path, human, llm, scattered)
    out = _calibrate(capsys, argv, "json")
    systems = out["systems"]
    assert out["estimates"]["design"]["kind"] == "pairs"
    assert systems["kendall_tau"] is None and systems["spearman_rho"] is None
    assert systems["per_system"] == [] and systems["largest_swaps"] == []
    assert "per-query measure" in systems["left_out"]
    assert "--strategy whole-queries" in systems["left_out"]
    text = " ".join(_calibrate(capsys, argv, "table").split())
    assert "System ranking by nDCG@10 left out" in text
    assert "Kendall tau" not in text and "rank swaps" not in text
    report = tmp_path / "report.html"
    assert main(["calibrate", *argv, "--bootstrap", "50", "--report", str(report)]) == 0
    page = report.read_text()
    assert 'id="systems-left-out"' in page and 'id="kendall_tau"' not in page


def test_a_whole_queries_sample_still_compares_rankings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    human, llm = _grades()
    whole = [row for row in human if int(row[0][1:]) < 5]
    out = _calibrate(capsys, _sampled(tmp_path, human, llm, whole), "json")
    assert out["estimates"]["design"]["kind"] == "whole-queries"
    assert out["systems"]["kendall_tau"] is not None
    assert out["systems"].get("left_out") is None
    assert len(out["systems"]["per_system"]) == 4
