"""`relgrade.evaluate`, `read_qrels` and `read_run`: `relgrade evaluate` for notebooks."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, cast

import pandas as pd

from calibration.spotcheck import also_judged
from grader.errors import InputError, RelgradeWarning
from grader.evaluation.baseline import COLUMNS, Options, baseline_name, compare
from grader.evaluation.files import read_qrels_input, run_joins
from grader.evaluation.scoring import Evaluation, check_measures, evaluate_judged
from grader.evaluation.significance import CORRECTIONS, TESTS, Correction, Test
from grader.io.python_inputs import grades_table, is_path, run_inputs, run_table
from grader.job.fill import evaluate_fill, fill_frame
from grader.metrics.measures import Measure


def measure_names(measures: Any) -> list[str | Measure | Any] | None:
    """Measures as strings, relgrade Measures or ir_measures measure objects, as a list. An
    ir_measures object keeps ir_measures' meaning (`ir_measures.P@10` is `P(rel=1)@10`)."""
    if measures is None:
        return None
    if isinstance(measures, str | Measure) or not isinstance(measures, Sequence | set):
        measures = [measures]
    return list(measures)


def warn(lines: Sequence[str], stacklevel: int = 3) -> None:
    """Each line the command prints as a warning, as a RelgradeWarning."""
    for line in lines:
        warnings.warn(line.removeprefix("warning: "), RelgradeWarning, stacklevel=stacklevel)


def evaluate(
    qrels: Any,
    runs: Any,
    measures: Any = None,
    per_query: bool = False,
    *,
    trec_eval_missing: bool = False,
    precision: Literal["float32", "float64"] = "float32",
    clamp: bool = False,
    fill: Any = None,
    llm_scale: str | Mapping[int, int] | None = None,
    fill_manifest: str | Path | None = None,
    trec_eval_level: int = 1,
    baseline: str | Path | None = None,
    test: Literal["t", "randomization", "bootstrap"] = "t",
    permutations: int = 10_000,
    seed: int = 0,
    correction: Literal["holm", "bonferroni", "none"] = "holm",
) -> pd.DataFrame:
    """Score runs against qrels, as `relgrade evaluate QRELS RUN ... --format json` does:
    the long frame `run, query_id, measure, value` (query_id "all" for the mean).

    `qrels` and each run: a path, a DataFrame, a pytrec_eval dict or ir_datasets tuples;
    `runs` one run, a list of paths or a mapping name -> run. `measures`: names or ir_measures
    objects, each with its tool's meaning (`P_10` is trec_eval's at `trec_eval_level`).
    `fill` is `--fill` (with `llm_scale`, `fill_manifest`), `baseline` is `--baseline` (with
    `test`, `permutations`, `seed`, `correction`): docs/python-api.md. The command's warnings
    are RelgradeWarnings; `attrs["notes"]` holds its other stderr lines.

    >>> import relgrade as rg
    >>> qrels = {"q1": {"d1": 1, "d2": 0}}
    >>> run = {"q1": {"d1": 0.9, "d2": 0.5}}
    >>> rg.evaluate(qrels, run, ["P(rel=1)@1", "nDCG@10"])
       run query_id       measure  value
    0  run      all  P(rel=1)@1    1.0
    1  run      all       nDCG@10    1.0
    """
    names = measure_names(measures)
    comparison = baseline_comparison(baseline, runs, test, permutations, seed, correction)
    if fill is not None:
        evaluation = evaluate_fill(
            qrels,
            runs,
            fill,
            names,
            also_judged=also_judged,
            llm_scale=llm_scale,
            fill_manifest=fill_manifest,
            skip_missing=trec_eval_missing,
            precision=precision,
            comparison=comparison,
            trec_eval_level=trec_eval_level,
        )
        return fill_frame(evaluation, per_query)
    if llm_scale is not None or fill_manifest is not None:
        raise InputError("llm_scale= and fill_manifest= go with fill=LLM_QRELS")
    missing: Literal["zero", "skip"] = "skip" if trec_eval_missing else "zero"
    return _scores(
        qrels, runs, names, per_query, comparison, missing, precision, clamp, trec_eval_level
    )


def _scores(
    qrels: Any,
    runs: Any,
    names: list[Any] | None,
    per_query: bool,
    comparison: Callable[[list[str]], Options] | None,
    missing: Literal["zero", "skip"],
    precision: Literal["float32", "float64"],
    clamp: bool,
    trec_eval_level: int,
) -> pd.DataFrame:
    """`evaluate` without `fill`."""
    check_measures(names)  # a bad name fails before any input is read
    judged, facts = read_qrels_input(qrels, clamp=clamp)
    joins = run_joins(runs, judged, precision=precision)
    options = None if comparison is None else comparison([n for n, _ in joins])
    evaluation = evaluate_judged(
        facts, joins, names, missing=missing, clamp=clamp, trec_eval_level=trec_eval_level
    )
    warn(evaluation.warnings)
    return _frame(evaluation, per_query, options)


def _frame(evaluation: Evaluation, per_query: bool, options: Options | None) -> pd.DataFrame:
    """The long frame of an evaluation, with the comparison's columns when `options`."""
    records = evaluation.records(per_query)
    columns = evaluation.columns()
    if options is not None:
        compare(evaluation.results, options).annotate(records)
        columns += COLUMNS
    frame = pd.DataFrame(records, columns=columns)
    for column in ["value", *(c for c in columns if c in COLUMNS or c == "judged_share")]:
        frame[column] = frame[column].astype("float64")
    frame.attrs["notes"] = list(evaluation.notes)
    frame.attrs["measures"] = list(evaluation.measures)
    return frame


def read_qrels(qrels: Any) -> pd.DataFrame:
    """Qrels or grades in any form `evaluate` takes, as `[query_id, doc_id, grade, ...]`.

    >>> import relgrade as rg
    >>> rg.read_qrels({"q1": {"d1": 2}})
      query_id doc_id  grade
    0       q1     d1      2
    """
    if is_path(qrels):
        from grader.io.grades import read_human_grades

        return read_human_grades(qrels, any_grade=True)
    return grades_table(qrels)


def read_run(run: Any, *, precision: Literal["float32", "float64"] = "float32") -> pd.DataFrame:
    """One run in any form `evaluate` takes, as `[query_id, doc_id, score, rank]`, ranked as
    trec_eval ranks (score descending, ties by doc id descending).

    >>> import relgrade as rg
    >>> rg.read_run({"q1": {"d1": 0.5, "d2": 0.9}})
      query_id doc_id  score  rank
    0       q1     d2    0.9     1
    1       q1     d1    0.5     2
    """
    if is_path(run):
        from grader.io.trec import read_run

        return read_run(str(run), precision=precision)
    return run_table(run, precision=precision)


def baseline_comparison(
    baseline: Any, runs: Any, test: str, permutations: int, seed: int, correction: str
) -> Callable[[Sequence[str]], Options] | None:
    """The options of `baseline=` (`evaluate --baseline`) from the runs' names, in the order
    `run_inputs(runs)` gives them (None without a baseline); its choices are checked at once,
    before any input is read."""
    if baseline is None:
        return None
    if test not in TESTS:
        raise InputError(f"test={test!r} is not a test", hint=f"one of {', '.join(TESTS)}")
    if correction not in CORRECTIONS:
        hint = f"one of {', '.join(CORRECTIONS)}"
        raise InputError(f"correction={correction!r} is not a correction", hint=hint)
    if isinstance(permutations, bool) or not isinstance(permutations, int) or permutations < 1:
        raise InputError(f"permutations must be a whole number >= 1, not {permutations!r}")

    def options(names: Sequence[str]) -> Options:
        sources = [str(run) if is_path(run) else None for _, run in run_inputs(runs)]
        name = baseline_name(str(baseline), names, sources, "baseline=")
        return Options(
            name, cast(Test, test), permutations, int(seed), cast(Correction, correction)
        )

    return options
