"""`evaluate --fill`, one path for the command and `relgrade.evaluate(fill=)`: each run scored
three ways (`grader.evaluation.fill`), with the also-judged weights of calibration's module
(`also_judged`, given by the caller: grader never imports calibration)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

import pandas as pd

from grader.errors import InputError, RelgradeWarning
from grader.evaluation.baseline import Options
from grader.evaluation.fill.evaluation import (
    BASELINE_COLUMNS,
    COLUMNS,
    FillEvaluation,
    evaluate_filled,
    llm_grades,
    people_grades,
)
from grader.evaluation.scoring import check_measures
from grader.io.grades import parse_llm_scale
from grader.io.python_inputs import is_path, run_frames
from grader.metrics.measures import Measure
from grader.spelling import option

Precision = Literal["float32", "float64"]


def evaluate_fill(
    qrels: Any,
    runs: Any,
    fill: Any,
    names: Sequence[str | Measure] | None,
    *,
    also_judged: ModuleType,
    llm_scale: str | Mapping[int, int] | None,
    fill_manifest: str | Path | None,
    skip_missing: bool,
    precision: Precision,
    comparison: Callable[[list[str]], Options] | None,
    trec_eval_level: int = 1,
    stdin: bool = False,
) -> FillEvaluation:
    """Score `runs` (paths or tables) with `qrels` (people's) and `fill` (the LLM's);
    `comparison` (--baseline) gives the comparison's options from the runs' names; a run `-`
    reads stdin with `stdin` (the command's), else it is refused."""
    if trec_eval_level != 1:
        level, filled = option("--trec-eval-level", "trec_eval_level="), option("--fill", "fill=")
        raise InputError(f"{level} does not go with {filled} (its names use level 1)")
    given = check_measures(names)  # a bad name fails before any input is read
    human, llm = people_grades(qrels), llm_grades(fill)
    frames = run_frames(runs, precision=precision, stdin=stdin)
    llm_path = str(fill) if is_path(fill) else None
    weights, manifest = also_judged.also_judged_weights(llm_path, fill_manifest)
    return evaluate_filled(
        human,
        llm,
        frames,
        given,
        typed=bool(names),
        llm_name=llm_path or "the fill= table",
        human_path=str(qrels) if is_path(qrels) else None,
        scale=_scale(llm_scale),
        missing="skip" if skip_missing else "zero",
        precision=precision,
        weights=weights,
        manifest=manifest,
        design=also_judged.fill_design(manifest),
        comparison=comparison(list(frames)) if comparison else None,
    )


def fill_frame(evaluation: FillEvaluation, per_query: bool) -> pd.DataFrame:
    """`--format json`'s records as a frame with `--format csv`'s columns (NaN where a record
    lacks a key); the decided thresholds as RelgradeWarnings, `attrs["notes"]` the other lines."""
    for line in evaluation.warnings:
        warnings.warn(line.removeprefix("warning: "), RelgradeWarning, stacklevel=3)
    baseline = BASELINE_COLUMNS if evaluation.comparison else []
    frame = pd.DataFrame(evaluation.records(per_query), columns=COLUMNS + baseline)
    for column in ["value", *baseline]:
        frame[column] = frame[column].astype("float64")
    frame.attrs["notes"] = list(evaluation.notes)
    frame.attrs["measures"] = list(evaluation.result.measures)
    return frame


def _scale(given: str | Mapping[int, int] | None) -> dict[int, int] | None:
    """`llm_scale` as `--llm-scale` takes it: "0:0,1:1,2:4,3:7" or {0: 0, 1: 1, 2: 4, 3: 7}."""
    if given is None:
        return None
    if isinstance(given, Mapping):
        given = ",".join(f"{k}:{v}" for k, v in given.items())
    return parse_llm_scale(given)
