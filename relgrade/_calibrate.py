"""`relgrade.calibrate` and its result `Calibration`: `relgrade calibrate` for notebooks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from calibration.calibrate import calibrate_grades
from calibration.summary_model import AGREEMENT_FIGURES, CalibrationSummary
from relgrade._evaluate import measure_names, warn

FIGURES = ("n", *(f for f in AGREEMENT_FIGURES if f != "krippendorff_alpha_interval"))


class Calibration:
    """What `relgrade calibrate` reports: `to_dict()` is its `--format json`, `to_frame()` the
    headline figures, `confusion` and `systems` its tables, `save_html(path)` its `--report`;
    a notebook shows the report inline (`_repr_html_`)."""

    def __init__(self, summary: CalibrationSummary) -> None:
        self.summary = summary

    def to_dict(self) -> dict[str, Any]:
        """The object `relgrade calibrate --format json` prints."""
        return self.summary.to_json()

    def to_frame(self) -> pd.DataFrame:
        """The agreement figures, one row each (`figure`, `value`), binary kappas as
        `binary_kappa@N`."""
        data = self.to_dict()
        rows = [(name, data.get(name)) for name in FIGURES if name in data]
        rows += [(f"binary_kappa@{k}", v) for k, v in (data.get("binary_kappa") or {}).items()]
        return pd.DataFrame(rows, columns=["figure", "value"])

    @property
    def confusion(self) -> pd.DataFrame:
        """Counts (weighted by 1/pi with a manifest): rows human 0..3, columns LLM 0..3."""
        matrix = self.to_dict()["confusion"]
        frame = pd.DataFrame(matrix, index=range(len(matrix)), columns=range(len(matrix)))
        frame.index.name, frame.columns.name = "human", "llm"
        return frame

    @property
    def systems(self) -> pd.DataFrame | None:
        """The per-system table (with runs), else None."""
        systems = self.to_dict().get("systems")
        if not systems:
            return None
        return pd.DataFrame(systems["per_system"])

    def save_html(self, path: str | Path) -> None:
        """The self-contained HTML report (`calibrate --report`), written atomically."""
        from calibration.report.html import write_report

        write_report(path, self.summary)

    def _repr_html_(self) -> str:
        from calibration.report.html import render_report

        return render_report(self.summary)

    def __repr__(self) -> str:
        data = self.to_dict()
        return (
            f"Calibration(n={data.get('n')}, cohen_kappa={data.get('cohen_kappa')}, "
            f"weighted_kappa_quadratic={data.get('weighted_kappa_quadratic')})"
        )


def calibrate(
    llm: Any,
    human: Any,
    runs: Any = None,
    measures: Any = None,
    manifest: str | Path | None = None,
    *,
    second_human: Any = None,
    docs: Any = None,
    clamp: bool = False,
    judge: str | None = None,
    no_manifest: bool = False,
    human_scale: str | None = None,
    seed: int = 0,
    bootstrap: int = 1000,
    threshold: int = 2,
) -> Calibration:
    """How far to trust LLM grades, as `relgrade calibrate --format json` measures it.

    `llm`: a judgments JSONL or qrels path, or the frame `relgrade.grade` returns (failed rows
    left out), or any qrels form `evaluate` takes; `human`: a grades CSV or qrels path, a
    DataFrame or dict. `runs` (as `evaluate` takes them) add system-ranking agreement under
    `measures` (default nDCG@10). `manifest`: the sample's manifest (default: the one beside a
    `human` path), for 1/pi weights. `docs` (any form `grade` takes) adds bias by length.

    >>> import relgrade as rg
    >>> llm = {"q1": {"d1": 3, "d2": 0, "d3": 2}, "q2": {"d4": 1, "d5": 3}}
    >>> human = {"q1": {"d1": 3, "d2": 1, "d3": 2}, "q2": {"d4": 1, "d5": 2}}
    >>> result = rg.calibrate(llm, human, bootstrap=0)
    >>> result.to_dict()["exact_agreement"]
    0.6
    """
    summary = calibrate_grades(**{**locals(), "measures": measure_names(measures)})  # the keywords
    warn(summary.warnings)
    return Calibration(summary)
