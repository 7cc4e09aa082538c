"""`evaluate --fill` as one call, for the command and `relgrade.evaluate(..., fill=...)`: the
inputs read and checked, the thresholds, `evaluate_fill`, the records (docs/filling-holes.md) and
stderr lines; with `--baseline`, the paired test per regime and the corrected difference."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from grader.errors import InputError
from grader.evaluation import baseline
from grader.evaluation.baseline import Options
from grader.evaluation.fill.interval import p_value
from grader.evaluation.fill.scores import REGIMES, SOURCES, FillResult, evaluate_fill
from grader.metrics.evaluate import Missing
from grader.metrics.measures import Measure

if TYPE_CHECKING:
    import pandas as pd


COLUMNS = ["run", "query_id", "measure", "regime", "source", "value", "corrected", "ci_low"]
COLUMNS += ["ci_high", "reason"]
CORRECTED = ["corrected_diff", "corrected_diff_ci_low", "corrected_diff_ci_high"]
CORRECTED += ["corrected_p_value"]
BASELINE_COLUMNS = [*baseline.COLUMNS, *CORRECTED]


@dataclass
class FillEvaluation:
    """The result, and the lines the command prints on stderr: `warnings` (the thresholds
    decided; said as warnings by the API) and `notes`."""

    result: FillResult
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    comparison: Options | None = None  # --baseline's

    def records(self, per_query: bool = False) -> list[dict[str, Any]]:
        """`--format json`'s records: scores by regime, then the shares by source; with a
        baseline, the comparison columns on the "all" records."""
        records = fill_records(self.result, per_query)
        if self.comparison is not None:
            _annotate(records, self.result, self.comparison)
        return records


def _annotate(records: list[dict[str, Any]], result: FillResult, options: Options) -> None:
    """The comparison columns added to the "all" records, in place (see the module docstring)."""
    scored = [r for r in records if "source" not in r]
    for regime in REGIMES:
        results = [(run, regimes[regime]) for run, regimes in result.scores.items()]
        baseline.compare(results, options).annotate([r for r in scored if r["regime"] == regime])
    for record in scored:
        if record["regime"] != "filled" or record["query_id"] != "all":
            continue
        if record["run"] == options.baseline:
            continue
        found = result.differences.get(record["run"], {}).get(record["measure"])
        values = (found.estimate, found.low, found.high, p_value(found)) if found else (None,) * 4
        record.update(zip(CORRECTED, values, strict=True))


def people_grades(value: Any) -> pd.DataFrame:
    """People's grades [query_id, doc_id, grade] (any integer) from a path or any qrels form."""
    from grader.io.python_inputs import grades_table, is_path

    if is_path(value):
        from grader.io.grades import read_human_grades

        return read_human_grades(value, any_grade=True)[["query_id", "doc_id", "grade"]]
    frame = grades_table(value, "human qrels")[["query_id", "doc_id", "grade"]]
    if frame.empty:
        raise InputError("the human qrels hold no grades", hint="give rows query_id, doc_id, grade")
    _check_pairs_once(frame, "human qrels")
    return frame


def llm_grades(value: Any) -> pd.DataFrame:
    """The LLM's grades [query_id, doc_id, grade] (0..3): a judgments JSONL or qrels path as
    `read_llm_grades` reads it (failed judgments are holes), or any form `calibrate` takes."""
    from grader.io.python_inputs import is_path, llm_grades_table

    if is_path(value):
        from grader.io.grades import read_llm_grades

        return read_llm_grades(value)[["query_id", "doc_id", "grade"]]
    frame = llm_grades_table(value)[["query_id", "doc_id", "grade"]]
    _check_pairs_once(frame, "LLM grades")
    return frame


def _check_pairs_once(frame: pd.DataFrame, what: str) -> None:
    twice = frame.duplicated(["query_id", "doc_id"], keep=False).to_numpy()
    if twice.any():
        rows = [int(i) for i in twice.nonzero()[0][:2]]
        q, d = frame["query_id"].iloc[rows[0]], frame["doc_id"].iloc[rows[0]]
        raise InputError(
            f"the {what} give the pair ({q}, {d}) twice, in rows {rows[0]} and {rows[1]}",
            hint="keep one grade per pair",
        )


def evaluate_filled(
    human: pd.DataFrame,
    llm: pd.DataFrame,
    runs: Mapping[str, pd.DataFrame],
    given: Sequence[str | Measure],
    *,
    typed: bool,
    llm_name: str,
    human_path: str | None = None,
    manifest: str = "",
    comparison: Options | None = None,
    **options: Any,
) -> FillEvaluation:
    """Each run scored three ways (`evaluate_fill`, given `options`), thresholds decided on
    people's grades and the LLM's mapped top (`typed`: names written by a person), and the lines
    the command prints. `manifest` named the weights; `comparison`: --baseline's."""
    from grader.metrics.measures import resolve_thresholds

    if not set(llm["query_id"].astype(str)) & set(human["query_id"].astype(str)):
        raise InputError(
            f"the LLM's grades ({llm_name}) share no query id with people's qrels: are they "
            "for another collection?",
            path=human_path,
            hint="give the qrels and the LLM grades of the same collection",
        )
    scale = options.get("scale")
    top = int(max(human["grade"].max(), max((scale or {3: 3}).values())))
    measures, warnings = resolve_thresholds(list(given), top, typed=typed)
    baseline = comparison.baseline if comparison else None
    result = evaluate_fill(human, llm, runs, measures, baseline=baseline, **options)
    for run, reasons in result.refused.items():  # a warning per run and reason: no interval
        by_reason: dict[str, list[str]] = {}
        for measure, why in reasons.items():
            by_reason.setdefault(why, []).append(measure)
        for why, named in by_reason.items():
            warnings.append(f"warning: no interval for {run} ({', '.join(named)}): {why}")
    notes = fill_notes(result, manifest, scale, options.get("missing", "zero"))
    return FillEvaluation(result, warnings, notes, comparison)


def fill_notes(
    result: FillResult, manifest: str, scale: dict[int, int] | None, missing: Missing = "zero"
) -> list[str]:
    """What was filled, over which queries, the scale, and the interval's method (or why
    there is none)."""
    notes = [
        f"filled: {result.holes:,} LLM grades on pairs people did not judge; "
        f"{result.overlap:,} pairs graded by both",
        _queries_note(result, missing),
    ]
    if scale is not None:
        from grader.io.grades import scale_text

        notes.append(f"LLM grades mapped by --llm-scale {scale_text(scale)}")
    if result.interval_note:
        notes.append(result.interval_note)
        if manifest:
            sample = " a sample of the holes people graded," if result.design == "holes" else ""
            notes.append(f"the pairs graded by both are{sample} weighted by 1/pi from {manifest}")
    elif result.overlap == 0:
        notes.append(
            "no interval for the filled score: the LLM graded no pair people judged "
            "(grade --also-judged N gives some)"
        )
    elif result.overlap == 1:
        notes.append(
            "no interval for the filled score: only 1 pair graded by both people and the LLM "
            "(it takes 2 or more; grade --also-judged N gives them)"
        )
    return notes


def _queries_note(result: FillResult, missing: Missing) -> str:
    """Which queries the means are over: people's, in every regime."""
    text = f"every regime averages over the {result.queries:,} queries of people's qrels"
    if missing == "skip":
        text += " that the run answers (--trec-eval-missing)"
    if result.outside:
        queries = result.outside_queries
        text += (
            f"; {result.outside:,} LLM grades on {queries:,} "
            f"{'query' if queries == 1 else 'queries'} people did not judge are left out "
            "(evaluate the merged qrels to score those)"
        )
    return text


def fill_records(result: FillResult, per_query: bool = False) -> list[dict[str, Any]]:
    """The records (see the module docstring), a NaN value kept as NaN."""
    records: list[dict[str, Any]] = []
    for row in result.rows(per_query):
        record = {k: v for k, v in row.items() if k == "value" or baseline.clean(v) is not None}
        if "reason" in record:  # no interval: said as null, with the reason
            record.update(corrected=None, ci_low=None, ci_high=None)
        records.append(record)
    for run, shares in result.shares.items():
        measure = "Share" if shares.k is None else f"Share@{shares.k}"
        row = {"run": run, "query_id": "all", "measure": measure, "regime": "filled"}
        records += [{**row, "source": s, "value": shares.share(s)} for s in SOURCES]
    return records
