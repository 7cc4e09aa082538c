"""`relgrade.evaluate`, `read_qrels` and `read_run`: `relgrade evaluate` for notebooks."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from grader.errors import InputError, RelgradeWarning
from grader.evaluation.baseline import COLUMNS, compare
from grader.evaluation.inputs import read_qrels_input, run_joins
from grader.evaluation.scoring import check_measures, evaluate_judged
from grader.io.python_inputs import grades_table, is_path, run_table
from grader.metrics.measures import Measure
from relgrade._baseline import baseline_options, check_choices
from relgrade._fill import evaluate_fill


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
    """Score runs against qrels, as `relgrade evaluate QRELS RUN ... --format json` does.

    `qrels`: a path (TREC qrels, grades CSV or judgments JSONL, .gz ok), a DataFrame
    (`query_id, doc_id, relevance|grade` or PyTerrier's `qid, docno, label`; the frame
    `relgrade.grade` returns too: failed rows stay unjudged), a pytrec_eval dict
    `{qid: {docid: grade}}` or an iterable of ir_datasets / ir_measures `Qrel`s.
    `runs`: one run (a path, a DataFrame with `score`, a dict `{qid: {docid: score}}`, an
    iterable of `ScoredDoc`s), a list of paths, or a mapping name -> run. `measures`: names or
    ir_measures measure objects (default: the command's); an ir_measures object is computed as
    ir_measures computes it (`ir_measures.P@10` is `P(rel=1)@10`), a trec_eval name (`P_10`,
    `map`) as trec_eval does at `trec_eval_level` (its -l). Returns the long frame
    `run, query_id, measure, value` (query_id "all" for the mean; `per_query` adds each query),
    with `requested` (each measure as asked) when a name is another tool's, and `judged_share`
    on the "all" rows of measures that look deeper than the labels. A threshold inferred from
    binary qrels, a run that answers no qrels query or whose ids the qrels do not know, and a
    measure looking deeper than the labels are said with a RelgradeWarning; `attrs["notes"]`
    holds the command's other stderr lines.

    `fill`: the LLM's grades (a judgments JSONL or qrels path, `relgrade.grade`'s frame, any
    qrels form) on top of people's `qrels` (any integer grade): `relgrade evaluate QRELS RUN
    ... --fill LLM_QRELS --format json`, each run three ways (column `regime`), the shares of
    its top k as rows `Share@k` with a `source`, `corrected, ci_low, ci_high` on the filled
    means with an interval (docs/filling-holes.md). `llm_scale` ("0:0,1:1,2:4,3:7" or a dict)
    and `fill_manifest` are `--llm-scale` and `--fill-manifest`; `clamp` is not used.

    `baseline`: a run's name (or path) to compare every other run with, as `--baseline`:
    the "all" rows get `diff, p_value, p_adjusted, diff_ci_low, diff_ci_high` (NaN on the
    baseline's); `test`, `permutations`, `seed` and `correction` are the command's flags
    (docs/significance.md).

    >>> import relgrade as rg
    >>> qrels = {"q1": {"d1": 1, "d2": 0}}
    >>> run = {"q1": {"d1": 0.9, "d2": 0.5}}
    >>> rg.evaluate(qrels, run, ["P(rel=1)@1", "nDCG@10"])
       run query_id       measure  value
    0  run      all  P(rel=1)@1    1.0
    1  run      all       nDCG@10    1.0
    """
    names = measure_names(measures)
    if baseline is not None:
        check_choices(test, permutations, correction)
    if fill is not None:
        if trec_eval_level != 1:
            raise InputError("trec_eval_level= does not go with fill= (its names use level 1)")
        return evaluate_fill(
            qrels,
            runs,
            fill,
            names,
            per_query,
            trec_eval_missing=trec_eval_missing,
            precision=precision,
            llm_scale=llm_scale,
            fill_manifest=fill_manifest,
            comparison=None
            if baseline is None
            else lambda names: baseline_options(
                baseline,
                runs,
                names,
                test=test,
                permutations=permutations,
                seed=seed,
                correction=correction,
            ),
        )
    if llm_scale is not None or fill_manifest is not None:
        raise InputError("llm_scale= and fill_manifest= go with fill=LLM_QRELS")
    check_measures(names)  # a bad name fails before any input is read
    judged, facts = read_qrels_input(qrels, clamp=clamp)
    joins = run_joins(runs, judged, precision=precision)
    options = None
    if baseline is not None:
        names_given = [n for n, _ in joins]
        options = baseline_options(
            baseline,
            runs,
            names_given,
            test=test,
            permutations=permutations,
            seed=seed,
            correction=correction,
        )
    missing: Literal["zero", "skip"] = "skip" if trec_eval_missing else "zero"
    evaluation = evaluate_judged(
        facts, joins, names, missing=missing, clamp=clamp, trec_eval_level=trec_eval_level
    )
    warn(evaluation.warnings)
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
        from grader.io.grades import read_grades_file

        return read_grades_file(qrels)
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
        from grader.io.runs import read_run_file

        return read_run_file(str(run), precision=precision)
    return run_table(run, precision=precision)
