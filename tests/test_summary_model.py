"""`calibrate`'s summary is a typed model whose JSON keeps DESIGN.md's contract: every key of
`calibrate --format json` present with its type, sections absent (not null) without their
inputs, and the model reading its own JSON back to the same JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from calibration.summary_model import CalibrationSummary, Estimate
from grader.cli.main import main

NUMBER = (int, float)


def _write(path: Path, rows: list[tuple[str, str, int]]) -> str:
    path.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in rows))
    return str(path)


def _inputs(tmp_path: Path) -> list[str]:
    """12 queries graded by the LLM, the first 8 whole by people, and two runs."""
    rng = np.random.default_rng(3)
    human, llm, runs = [], [], []
    for q in range(12):
        for d in range(10):
            h = int(rng.integers(0, 4))
            m = int(np.clip(h + rng.integers(-1, 2), 0, 3))
            human.append((f"q{q}", f"d{q}_{d}", h))
            llm.append((f"q{q}", f"d{q}_{d}", m))
    for i, noise in enumerate((0.5, 3.0)):
        lines = []
        for q in range(12):
            rows = [(d, g + rng.normal(0, noise)) for qq, d, g in human if qq == f"q{q}"]
            ranked = sorted(rows, key=lambda r: -r[1])
            lines += [f"q{q} Q0 {d} {r} {s:.5f} s{i}\n" for r, (d, s) in enumerate(ranked, 1)]
        (tmp_path / f"sys{i}.txt").write_text("".join(lines))
        runs += ["--run", str(tmp_path / f"sys{i}.txt")]
    part = [row for row in human if int(row[0][1:]) < 8]
    return [
        "--llm",
        _write(tmp_path / "llm.txt", llm),
        "--human",
        _write(tmp_path / "human.txt", part),
        "--bootstrap",
        "50",
        *runs,
    ]


def _calibrate(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["calibrate", *argv, "--format", "json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def _is_number_or_null(value: object) -> bool:
    return value is None or (isinstance(value, NUMBER) and not isinstance(value, bool))


def _is_interval(value: object) -> bool:
    return isinstance(value, list) and len(value) == 2 and all(map(_is_number_or_null, value))


def test_the_json_keeps_every_contract_key_with_its_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _calibrate(_inputs(tmp_path), capsys)
    assert isinstance(out["n"], int) and out["n"] == 80
    for key in (
        "exact_agreement",
        "within_one",
        "cohen_kappa",
        "weighted_kappa_linear",
        "weighted_kappa_quadratic",
        "krippendorff_alpha_ordinal",
        "mean_bias",
    ):
        assert isinstance(out[key], float), key
    assert list(out["binary_kappa"]) == ["1", "2", "3"]
    assert all(_is_number_or_null(v) for v in out["binary_kappa"].values())
    assert len(out["confusion"]) == 4 and all(len(row) == 4 for row in out["confusion"])
    assert all(isinstance(v, int) for row in out["confusion"] for v in row)  # counts stay ints
    assert sum(map(sum, out["confusion"])) == out["n"]
    systems = out["systems"]
    for key in ("kendall_tau", "spearman_rho", "tau_ap"):
        assert _is_number_or_null(systems[key]), key
    assert {r["run"] for r in systems["per_system"]} == {"sys0", "sys1"}
    for row in systems["per_system"]:
        assert set(row) == {"run", "human", "llm", "human_rank", "llm_rank", "rank_change"}
        assert isinstance(row["human_rank"], int) and isinstance(row["rank_change"], int)
    estimates = out["estimates"]
    assert set(estimates["runs"]) == {"sys0", "sys1"}
    for estimate in [estimates["relevant_share"], *estimates["runs"].values()]:
        assert set(estimate) >= {"llm_only", "human_only", "ppi", "ppi_ci"}
        assert _is_number_or_null(estimate["llm_only"]) and _is_number_or_null(estimate["ppi"])
        assert _is_interval(estimate["ppi_ci"])
        assert "lambda" in estimate  # the JSON name, not the field's
    assert out["weighted"] is False and "weighted_n" not in out  # absent, not null, unweighted
    assert "confidence" not in out and "human_vs_human" not in out
    assert out["bias_by_length"] is None  # no --docs: present and null, as before
    assert out["manifest"] is None and out["inputs"]["runs"] == ["sys0", "sys1"]


def test_the_model_reads_its_own_json_back_to_the_same_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = _calibrate(_inputs(tmp_path), capsys)
    again = CalibrationSummary.model_validate(out)
    assert json.dumps(again.to_json()) == json.dumps(out)  # same keys, same order
    assert again.binary_kappa.by_threshold()[1] == (2, out["binary_kappa"]["2"])
    assert again["cohen_kappa"] == again.cohen_kappa == out["cohen_kappa"]
    assert again.systems is not None and again.systems["kendall_tau"] == again.systems.kendall_tau


def test_an_llm_only_estimate_has_no_ppi_keys_and_a_ppi_one_has_them() -> None:
    llm_only = Estimate.model_validate(
        {
            "llm_only": 0.4,
            "human_only": None,
            "ppi": None,
            "ppi_ci": None,
            "human_only_ci": None,
            "n_labelled": 0,
            "n_unlabelled": 6,
            "measure": "nDCG(rel=2)@10",
            "unit": "query",
            "design": "pairs",
            "population": "finite",
            "estimand": "mean nDCG(rel=2)@10 over these 6 queries with LLM grades",
            "caution": None,
        }
    ).to_json()
    assert "lambda" not in llm_only and "interval" not in llm_only and "weighted" not in llm_only
    assert llm_only["ppi"] is None and llm_only["measure"] == "nDCG(rel=2)@10"
    ppi = Estimate.model_validate({**llm_only, "lambda": None, "interval": "normal"}).to_json()
    assert ppi["lambda"] is None and ppi["interval"] == "normal"  # set to null: printed as null


def test_reading_an_unknown_key_is_a_key_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = CalibrationSummary.model_validate(_calibrate(_inputs(tmp_path), capsys))
    with pytest.raises(KeyError):
        summary["cohens_kappa"]
    with pytest.raises(KeyError):
        summary.figure("n")
