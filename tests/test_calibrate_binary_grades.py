"""`calibrate` on binary human grades (0/1) against LLM grades 0..3: compared at the matching
split (checked against scikit-learn), warned about, read as relevant in the PPI++ share, and
`--human-scale` stating the scale instead of inferring it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from grader.cli.main import main
from tests.helpers.calibrate_files import Rows, calibrate_json, write_grades_csv, write_qrels_rows
from tests.helpers.params import quick_first


@pytest.mark.slow
@pytest.mark.parametrize("threshold", quick_first([2, 3]))
def test_binary_human_grades_are_compared_at_the_matching_split(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], threshold: int
) -> None:
    rng = np.random.default_rng(11)
    human: Rows = []
    llm: Rows = []
    for i in range(200):
        q, d = f"q{i % 10}", f"d{i}"
        rel = int(rng.random() < 0.4)
        grade = int(rng.integers(2, 4)) if rel else int(rng.integers(0, 2))
        if rng.random() < 0.2:
            grade = int(rng.integers(0, 4))
        human.append((q, d, rel))
        llm.append((q, d, grade))
    hp = write_grades_csv(tmp_path / "human.csv", human)
    lp = write_qrels_rows(tmp_path / "llm.qrels", llm)
    report = tmp_path / "report.html"
    argv = ["--llm", str(lp), "--human", str(hp), "--threshold", str(threshold)]
    argv += ["--bootstrap", "200", "--report", str(report)]
    assert main(["calibrate", *argv, "--format", "json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert "warning: human grades are binary (0/1) but LLM grades use 0..3" in captured.err
    assert out["warnings"] and "scales differ" in out["warnings"][0]
    h = np.array([g for *_, g in human])
    m = np.array([g for *_, g in llm])
    b = out["binary_scale"]
    assert b["threshold"] == threshold
    assert b["cohen_kappa"] == pytest.approx(cohen_kappa_score(h, m >= threshold), abs=1e-12)
    assert b["exact_agreement"] == pytest.approx(np.mean(h == (m >= threshold)))
    assert b["human_relevant"] == pytest.approx(np.mean(h))  # not 0%: a human 1 is relevant
    assert b["llm_relevant"] == pytest.approx(np.mean(m >= threshold))
    assert np.array(b["confusion"]).sum() == len(human)
    lo, hi = b["intervals"]["cohen_kappa"]
    assert lo < b["cohen_kappa"] < hi
    # The contract's 4x4 confusion stays, rows 2 and 3 empty: people never used those grades.
    assert np.array(out["confusion"]).shape == (4, 4) and sum(map(sum, out["confusion"][2:])) == 0
    assert out["verdict"]["label"] == "scales_differ"
    assert f"{np.mean(h):.0%} (grade 1)" in out["verdict"]["text"]
    page = report.read_text()
    assert page.index('id="binary-confusion"') < page.index('id="confusion"')
    assert f'<span id="binary_cohen_kappa">{b["cohen_kappa"]:.4f}</span>' in page
    assert main(["calibrate", *argv]) == 0
    table = " ".join(capsys.readouterr().out.split())
    assert table.startswith(
        f"Binary comparison (human 1 = relevant; LLM relevant when grade >= {threshold})"
    )
    assert table.index("Binary comparison") < table.index("Agreement on 200 pairs")
    assert "for reference only: human grades are 0/1" in table


def test_graded_human_grades_get_no_scale_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows: Rows = [(f"q{i % 3}", f"d{i}", i % 4) for i in range(24)]
    hp = write_grades_csv(tmp_path / "human.csv", rows)
    lp = write_qrels_rows(tmp_path / "llm.qrels", [(q, d, (g + 1) % 4) for q, d, g in rows])
    assert main(["calibrate", "--llm", str(lp), "--human", str(hp), "--format", "json"]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["binary_scale"] is None and out["warnings"] == [] and "warning" not in captured.err


def test_binary_human_grades_count_as_relevant_in_the_ppi_share(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # People graded half the pairs 0/1 (1 = relevant), the LLM all of them 0..3: the PPI++
    # relevant share must read a human 1 as relevant, not call every human pair irrelevant.
    human: Rows = []
    llm: Rows = []
    for q in range(6):
        for k in range(10):
            g = (q + k) % 4
            llm.append((f"q{q}", f"d{q}_{k}", g))
            if k < 5:
                human.append((f"q{q}", f"d{q}_{k}", int(g >= 2)))
    hp = write_grades_csv(tmp_path / "human.csv", human)
    lp = write_qrels_rows(tmp_path / "llm.qrels", llm)
    out = calibrate_json(
        capsys, ["--llm", str(lp), "--human", str(hp), "--no-manifest", "--bootstrap", "50"]
    )
    share = out["estimates"]["relevant_share"]
    assert out["binary_scale"] is not None
    assert share["human_only"] == pytest.approx(np.mean([g for *_, g in human]))
    assert share["ppi_ci"][0] <= np.mean([g >= 2 for *_, g in llm]) <= share["ppi_ci"][1]
    assert "human grade >= 1" in share["estimand"]


def _graded_half(tmp_path: Path, top: int) -> tuple[Path, Path]:
    """(human grades, LLM qrels): the LLM graded 60 pairs 0..3, people half of them with the
    LLM's grade capped at `top`."""
    human: Rows = []
    llm: Rows = []
    for q in range(6):
        for k in range(10):
            g = (q + k) % 4
            llm.append((f"q{q}", f"d{q}_{k}", g))
            if k < 5:
                human.append((f"q{q}", f"d{q}_{k}", min(top, g)))
    return write_grades_csv(tmp_path / "human.csv", human), write_qrels_rows(tmp_path / "l", llm)


def test_human_scale_overrides_the_inference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hp, lp = _graded_half(tmp_path, top=1)  # a 0..3 sample that happened to hold no 2 or 3
    argv = ["--llm", str(lp), "--human", str(hp), "--no-manifest", "--bootstrap", "0"]
    inferred = calibrate_json(capsys, argv)
    assert inferred["binary_scale"] is not None  # read as binary: 1 = relevant
    stated = calibrate_json(capsys, [*argv, "--human-scale", "0-3"])
    assert stated["binary_scale"] is None and stated["verdict"]["label"] != "scales_differ"
    assert stated["estimates"]["relevant_share"]["human_only"] == 0.0  # no human 2 or 3
    assert inferred["estimates"]["relevant_share"]["human_only"] > 0.0


def test_human_scale_binary_refuses_a_grade_above_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hp, lp = _graded_half(tmp_path, top=3)
    argv = ["calibrate", "--llm", str(lp), "--human", str(hp), "--human-scale", "binary"]
    assert main([*argv, "--bootstrap", "0"]) == 2
    err = capsys.readouterr().err
    assert "human.csv" in err and "--human-scale binary" in err
