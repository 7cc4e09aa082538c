"""`evaluate --fill ... --baseline NAME`: the plain paired test in each regime, and the
corrected difference of the filled scores, estimated jointly, through the command and the API."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import relgrade as rg
from grader.cli.main import main
from grader.evaluation.fill.scores import REGIMES
from tests.helpers.fill_top import top_world, write_qrels
from tests.test_fill_refusal import _files, _pairs, _sample

MEASURES = ["nDCG@5", "P(rel=2)@5"]


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> list[dict[str, Any]]:
    capsys.readouterr()
    assert main(["evaluate", *argv, "--format", "json"]) == 0
    return list(json.loads(capsys.readouterr().out))


@pytest.fixture
def world_files(tmp_path: Path) -> dict[str, Any]:
    """A new system's holes, a graded sample of them (the design with an interval)."""
    world = top_world(seed=5, right=0.7, also=0)
    human, llm, runs = _files(tmp_path, world)
    manifest = _sample(tmp_path, llm, human, n=30)
    drawn = {(p["query_id"], p["doc_id"]) for p in json.loads(manifest.read_text())["pairs"]}
    graded = world.holes[[k in drawn for k in _pairs(world.holes)]]
    people = tmp_path / "people.qrels"
    write_qrels(people, pd.concat([world.human, graded]))
    return {"people": people, "llm": llm, "runs": runs, "manifest": manifest}


def test_fill_with_a_baseline_gives_plain_and_corrected_differences(
    world_files: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = world_files
    runs = [str(r) for r in f["runs"]]
    argv = [str(f["people"]), *runs, "--fill", str(f["llm"]), "-m", *MEASURES]
    argv += ["--fill-manifest", str(f["manifest"])]
    records = _json(capsys, [*argv, "--baseline", "r0"])
    means = {
        (r["run"], r["measure"], r["regime"]): r
        for r in records
        if r["query_id"] == "all" and "source" not in r
    }
    # The regime with holes as non-relevant is people's qrels as they are: its comparison is
    # the plain evaluate --baseline's on them.
    plain = _json(capsys, [str(f["people"]), *runs, "-m", *MEASURES, "--baseline", "r0"])
    for r in plain:
        if r["query_id"] == "all" and r["run"] == "r1":
            ours = means[("r1", r["measure"], "holes_nonrelevant")]
            for key in ("diff", "p_value", "diff_ci_low", "diff_ci_high"):
                assert ours[key] == pytest.approx(r[key], abs=1e-12)
    for measure in MEASURES:
        for regime in REGIMES:
            assert means[("r0", measure, regime)]["p_value"] is None
            assert means[("r1", measure, regime)]["p_adjusted"] >= 0.0
        mine, base = means[("r1", measure, "filled")], means[("r0", measure, "filled")]
        assert mine["corrected_diff"] == pytest.approx(
            mine["corrected"] - base["corrected"], abs=1e-9
        )
        assert mine["corrected_diff_ci_low"] < mine["corrected_diff"]
        assert mine["corrected_diff"] < mine["corrected_diff_ci_high"]
        assert 0.0 <= mine["corrected_p_value"] <= 1.0
        assert "corrected_diff" not in base
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame = rg.evaluate(
            str(f["people"]),
            runs,
            MEASURES,
            fill=str(f["llm"]),
            fill_manifest=f["manifest"],
            baseline="r0",
        )
    row = frame[(frame.run == "r1") & (frame.regime == "filled") & (frame.measure == "nDCG@5")]
    assert row["corrected_diff"].iloc[0] == pytest.approx(
        means[("r1", "nDCG@5", "filled")]["corrected_diff"], abs=1e-12
    )
    assert row["p_adjusted"].iloc[0] == pytest.approx(
        means[("r1", "nDCG@5", "filled")]["p_adjusted"], abs=1e-12
    )


def test_fill_with_a_baseline_in_csv_and_table(
    world_files: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    f = world_files
    argv = ["evaluate", str(f["people"]), *map(str, f["runs"]), "--fill", str(f["llm"])]
    argv += ["--fill-manifest", str(f["manifest"]), "-m", *MEASURES, "--baseline", "r0"]
    capsys.readouterr()
    assert main([*argv, "--format", "csv"]) == 0
    header = capsys.readouterr().out.splitlines()[0].split(",")
    assert header[-9:] == [
        "diff",
        "p_value",
        "p_adjusted",
        "diff_ci_low",
        "diff_ci_high",
        "corrected_diff",
        "corrected_diff_ci_low",
        "corrected_diff_ci_high",
        "corrected_p_value",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "difference from the baseline r0" in out
