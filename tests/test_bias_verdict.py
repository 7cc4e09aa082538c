"""The verdict on the LLM judge's mean bias: lenient, strict, balanced, or inconclusive when its
interval spans both signs or reaches past the margin, through `calibrate` and at the bounds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from calibration.stats.bias import LENIENCY_MARGIN, verdict
from grader.cli.main import main
from tests.helpers.calibrate_files import Rows, calibrate_json, write_grades_csv, write_qrels_rows


def test_a_bias_whose_interval_spans_both_signs_is_inconclusive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Four queries: the LLM grades two of them 2-3 points up, one 1 point down, one as people do,
    # so the query bootstrap's interval of the mean bias runs from below 0 to far above.
    human: Rows = []
    llm: Rows = []
    shift = {"q0": 3, "q1": 2, "q2": -1, "q3": 0}
    for q, s in shift.items():
        for d in range(5):
            h = 0 if s > 0 else (1 if s < 0 else d % 4)
            human.append((q, f"{q}d{d}", h))
            llm.append((q, f"{q}d{d}", h + s))
    hp = write_grades_csv(tmp_path / "human.csv", human)
    lp = write_qrels_rows(tmp_path / "llm.qrels", llm)
    argv = ["--llm", str(lp), "--human", str(hp), "--bootstrap", "500"]
    out = calibrate_json(capsys, argv)
    bias = out["mean_bias"]
    lo, hi = out["intervals"]["mean_bias"]
    assert bias == pytest.approx(
        np.mean([m - h for (_, _, h), (_, _, m) in zip(human, llm, strict=True)])
    )
    assert bias >= LENIENCY_MARGIN and lo < 0 < hi  # sizeable, yet the sign is not known
    assert out["verdict"]["label"] == "inconclusive"
    assert "inconclusive" in out["verdict"]["text"] and "balanced" not in out["verdict"]["text"]
    assert main(["calibrate", *argv]) == 0
    assert "Verdict: Whether the LLM judge is lenient or strict is inconclusive" in (
        " ".join(capsys.readouterr().out.split())
    )


def test_verdict_labels_at_the_documented_bounds() -> None:
    m = LENIENCY_MARGIN
    assert verdict(0.57, [-0.42, 1.58], None, None)["label"] == "inconclusive"  # the case
    assert verdict(0.3, [-0.05, 0.6], None, None)["label"] == "inconclusive"  # sizeable, 0 inside
    assert verdict(0.02, [-2 * m, 2 * m], None, None)["label"] == "inconclusive"  # both signs
    assert verdict(0.02, [-0.05, 0.3], None, None)["label"] == "inconclusive"  # reaches +0.3
    assert verdict(-0.09, [-0.35, 0.05], None, None)["label"] == "inconclusive"  # issue 29
    assert verdict(0.05, [0.01, 0.12], None, None)["label"] == "inconclusive"  # 0 out, > m in
    assert verdict(0.02, [-0.05, 0.05], None, None)["label"] == "balanced"
    assert verdict(-0.09, [-0.099, -0.02], None, None)["label"] == "balanced"  # within +-m
    assert verdict(0.57, [0.2, 0.9], None, None)["label"] == "lenient"
    assert verdict(-0.57, [-0.9, -0.2], None, None)["label"] == "strict"
    assert verdict(0.57, None, None, None)["label"] == "lenient"  # no bootstrap: bias decides
