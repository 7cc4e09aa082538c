"""`relgrade.evaluate(qrels, runs, fill=LLM)`: `relgrade evaluate QRELS RUN ... --fill LLM`."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from calibration.spotcheck.also_judged import also_judged_weights, fill_design
from grader.errors import InputError, RelgradeWarning
from grader.evaluation.baseline import Options
from grader.evaluation.fill.evaluation import (
    BASELINE_COLUMNS,
    COLUMNS,
    evaluate_filled,
    llm_grades,
    people_grades,
)
from grader.evaluation.scoring import check_measures
from grader.io.grades import parse_llm_scale
from grader.io.python_inputs import is_path, run_inputs, run_table
from grader.io.runs import run_names
from grader.metrics.measures import Measure


def evaluate_fill(
    qrels: Any,
    runs: Any,
    fill: Any,
    names: Sequence[str | Measure] | None,
    per_query: bool,
    *,
    trec_eval_missing: bool,
    precision: Literal["float32", "float64"],
    llm_scale: str | Mapping[int, int] | None,
    fill_manifest: str | Path | None,
    comparison: Callable[[list[str]], Options] | None = None,
    trec_eval_level: int = 1,
) -> pd.DataFrame:
    """`evaluate --fill --format json`'s records as a frame with `--format csv`'s columns (NaN where
    a record lacks a key); `comparison` (baseline=) gives the comparison's options from the runs'
    names. The decided thresholds are RelgradeWarnings; `attrs["notes"]` the other stderr lines.
    """
    if trec_eval_level != 1:
        raise InputError("trec_eval_level= does not go with fill= (its names use level 1)")
    given = check_measures(names)  # a bad name fails before any input is read
    human = people_grades(qrels)
    llm = llm_grades(fill)
    scale = _scale(llm_scale)
    frames = _run_frames(runs, precision)
    llm_path = str(fill) if is_path(fill) else None
    weights, manifest = also_judged_weights(llm_path, fill_manifest)
    evaluation = evaluate_filled(
        human,
        llm,
        frames,
        given,
        typed=bool(names),
        llm_name=llm_path or "the fill= table",
        human_path=str(qrels) if is_path(qrels) else None,
        scale=scale,
        missing="skip" if trec_eval_missing else "zero",
        precision=precision,
        weights=weights,
        manifest=manifest,
        design=fill_design(manifest),
        comparison=comparison(list(frames)) if comparison else None,
    )
    for line in evaluation.warnings:
        warnings.warn(line.removeprefix("warning: "), RelgradeWarning, stacklevel=3)
    columns = COLUMNS + (BASELINE_COLUMNS if comparison else [])
    frame = pd.DataFrame(evaluation.records(per_query), columns=columns)
    for column in ["value", *(BASELINE_COLUMNS if comparison else [])]:
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


def _run_frames(runs: Any, precision: Literal["float32", "float64"]) -> dict[str, pd.DataFrame]:
    """Each run by its name, as `evaluate` names them (a path's by `run_names`, an unnamed
    table "run")."""
    from grader.io.trec import read_run

    items = run_inputs(runs)
    paths = iter(run_names([str(r) for _, r in items if is_path(r)]))
    frames: dict[str, pd.DataFrame] = {}
    for name, run in items:
        if is_path(run) and str(run) == "-":
            raise InputError(
                "--fill reads each RUN from a file, not stdin (-)", hint="save it first"
            )
        if is_path(run):
            frames[name or next(paths)] = read_run(str(run), precision=precision)
        else:
            frames[name or "run"] = run_table(run, precision=precision)
    return frames
