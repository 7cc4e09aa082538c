"""`calibrate --second-human`: human-vs-human agreement beside LLM-vs-human on the same pairs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import cohen_kappa_score

from calibration.stats.agreement import human_vs_human
from grader.cli.main import main
from tests.helpers.calibrate_files import Rows, calibrate_json, write_grades_csv, write_qrels_rows


def _frame(qids: list[str], dids: list[str], grades: list[int]) -> pd.DataFrame:
    return pd.DataFrame({"query_id": qids, "doc_id": dids, "grade": grades})


def test_both_comparisons_use_only_the_pairs_all_three_graded() -> None:
    rng = np.random.default_rng(7)
    n = 60
    qids = [f"q{i % 6}" for i in range(n)]
    dids = [f"d{i}" for i in range(n)]
    a = rng.integers(0, 4, n)
    b = np.where(rng.random(n) < 0.7, a, rng.integers(0, 4, n))
    llm = np.where(rng.random(n) < 0.4, a, rng.integers(0, 4, n))
    # The second person graded only the first 50 pairs; the LLM graded all but pair 0.
    out = human_vs_human(
        _frame(qids, dids, a.tolist()),
        _frame(qids[:50], dids[:50], b[:50].tolist()),
        _frame(qids[1:], dids[1:], llm[1:].tolist()),
    )
    assert out["n"] == 49
    common = slice(1, 50)
    labels = [0, 1, 2, 3]
    expected_hh = cohen_kappa_score(a[common], b[common], labels=labels)
    expected_llm = cohen_kappa_score(a[common], llm[common], labels=labels, weights="quadratic")
    assert out["humans"]["cohen_kappa"] == pytest.approx(expected_hh, abs=1e-12)
    assert out["llm"]["weighted_kappa_quadratic"] == pytest.approx(expected_llm, abs=1e-12)
    assert out["humans"]["exact_agreement"] == pytest.approx(np.mean(a[common] == b[common]))


def test_cli_prints_human_vs_human_in_json_and_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows_a = ["query_id,doc_id,grade"]
    rows_b = ["query_id,doc_id,grade"]
    llm = []
    for i in range(40):
        q, d, g = f"q{i % 4}", f"d{i}", i % 4
        rows_a.append(f"{q},{d},{g}")
        rows_b.append(f"{q},{d},{g if i % 5 else (g + 1) % 4}")
        llm.append(f"{q} 0 {d} {g if i % 2 else 3}")
    (tmp_path / "a.csv").write_text("\n".join(rows_a) + "\n")
    (tmp_path / "b.csv").write_text("\n".join(rows_b) + "\n")
    (tmp_path / "llm.qrels").write_text("\n".join(llm) + "\n")
    base = ["calibrate", "--llm", str(tmp_path / "llm.qrels"), "--human", str(tmp_path / "a.csv")]
    base += ["--second-human", str(tmp_path / "b.csv"), "--bootstrap", "0"]
    assert main([*base, "--format", "json"]) == 0
    hh = json.loads(capsys.readouterr().out)["human_vs_human"]
    assert hh["n"] == 40
    assert hh["humans"]["exact_agreement"] == pytest.approx(32 / 40)
    assert hh["llm"]["exact_agreement"] == pytest.approx(20 / 40)  # odd i agree, even never
    assert main(base) == 0
    assert "Human vs human beside LLM vs human" in capsys.readouterr().out


def test_human_vs_human_is_weighted_like_the_main_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(3)
    a: Rows = []
    b: Rows = []
    llm: Rows = []
    probs = []
    for i in range(120):
        q, d = f"q{i % 8}", f"d{i}"
        g = int(rng.integers(0, 4))
        a.append((q, d, g))
        b.append((q, d, g if rng.random() < 0.6 else int(rng.integers(0, 4))))
        m = min(3, g + int(rng.integers(0, 2))) if g < 2 else int(rng.integers(0, 4))
        llm.append((q, d, m))
        probs.append(0.05 if g >= 2 else 0.5)  # a stratified sample: rare grades drawn more
    hp = write_grades_csv(tmp_path / "alice.csv", a)
    bp = write_grades_csv(tmp_path / "bob.csv", b)
    lp = write_qrels_rows(tmp_path / "llm.qrels", llm)
    manifest = {
        "strategy": "stratified",
        "seed": 1,
        "population": 5000,
        "pairs": [
            {"query_id": q, "doc_id": d, "inclusion_probability": p}
            for (q, d, _), p in zip(a, probs, strict=True)
        ],
    }
    (tmp_path / "alice.manifest.json").write_text(json.dumps(manifest))
    argv = ["--llm", str(lp), "--human", str(hp), "--second-human", str(bp), "--bootstrap", "0"]
    out = calibrate_json(capsys, argv)
    hh = out["human_vs_human"]
    assert out["weighted"] is True and hh["weighted"] is True and hh["n"] == 120
    # The same pairs as the main table, so the LLM column must equal it figure for figure.
    for key in ("exact_agreement", "cohen_kappa", "weighted_kappa_quadratic", "mean_bias"):
        assert hh["llm"][key] == pytest.approx(out[key], abs=1e-12)
    w = 1 / np.array(probs)
    ga, gb = np.array([g for *_, g in a]), np.array([g for *_, g in b])
    assert hh["humans"]["cohen_kappa"] == pytest.approx(
        cohen_kappa_score(ga, gb, sample_weight=w), abs=1e-12
    )
    assert hh["humans"]["exact_agreement"] == pytest.approx(np.average(ga == gb, weights=w))
    assert hh["humans"]["exact_agreement"] != pytest.approx(np.mean(ga == gb))
    assert hh["humans"]["mean_bias"] == pytest.approx(np.average(gb - ga, weights=w))
    assert main(["calibrate", *argv]) == 0
    table = capsys.readouterr().out
    assert "(weighted by the sample manifest, as above)" in " ".join(table.split())
    lines = {line.split("│")[1].strip(): line for line in table.splitlines() if "│" in line}
    cells = [c.strip() for c in lines["mean bias (LLM - human A)"].split("│")[1:-1]]
    assert cells == ["mean bias (LLM - human A)", "", f"{hh['llm']['mean_bias']:.4f}"]
    cells = [c.strip() for c in lines["mean bias (human B - human A)"].split("│")[1:-1]]
    assert cells == ["mean bias (human B - human A)", f"{hh['humans']['mean_bias']:.4f}", ""]
