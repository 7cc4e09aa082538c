"""`relgrade.grade` and `relgrade.agrade`: `relgrade grade` for notebooks and async code."""

from __future__ import annotations

import argparse
from typing import Any

import pandas as pd

from grader import defaults
from grader.cli.grade_job import grade_flags, grade_selection
from grader.errors import BudgetError, InputError
from grader.grading.api_frames import judgments_table, pairs_from_table, queries_in_runs
from grader.grading.events import ProgressCallback, StopButton
from grader.grading.pairs import PairSelection, pairs_to_grade
from grader.grading.pipeline import GradingReport
from grader.io.python_inputs import grades_table, is_path, run_inputs, run_table
from grader.io.texts import all_docs, docs_of, queries_of
from grader.judges.registry import judge_kind
from grader.models import Doc
from relgrade._evaluate import warn


class _Job:
    """One call's flags, pairs and documents (for the lexical judge's statistics)."""

    def __init__(self, args: argparse.Namespace, selection: PairSelection, docs: dict[str, Doc]):
        self.args, self.selection, self.docs = args, selection, docs
        self.notes: list[str] = []
        self.notices: list[str] = []
        """The judges' notices about the server (a mode switch, a model not listed): warned."""

    async def graded(
        self, progress: ProgressCallback | None, stop: StopButton | None
    ) -> GradingReport:
        report, _ = await grade_selection(
            self.args,
            self.selection.pairs,
            self.docs,
            progress=progress,
            say=self.notes.append,
            notice=self.notices.append,
            stop=stop,
        )
        return report


def _job(given: dict[str, Any]) -> _Job:
    """The job of one call of `grade` or `agrade` from its arguments (their `locals()`: the
    two take the same ones): grade's flags from the keywords, then the pairs to grade."""
    given = dict(given)
    inputs = {k: given.pop(k) for k in ("pairs", "runs", "queries", "docs", "skip_judged")}
    return _select(**inputs, args=_flags(**given))


def _flags(
    *,
    model: Any,
    judge: str,
    prompt: str | None,
    base_url: str | list[str] | None,
    store: Any,
    concurrency: int,
    depth: int,
    progress: bool,
    options: dict[str, Any],
) -> argparse.Namespace:
    models = [] if model is None else [model] if isinstance(model, str) else list(model)
    given: dict[str, Any] = {
        "model": models,
        "judge": judge,
        "base_url": base_url,
        "store": str(store),
        "concurrency": concurrency,
        "depth": depth,
        "quiet": not progress,
        **options,
    }
    if prompt is not None:
        given["prompt"] = prompt
    return grade_flags(**given)


def _runs(runs: Any) -> list[Any]:
    """Run paths as they are; other runs as frames ranked as trec_eval ranks, named."""
    out: list[Any] = []
    for name, run in run_inputs(runs):
        if is_path(run):
            out.append(str(run))
        else:
            frame = run_table(run)
            frame.attrs["name"] = name or "run"
            out.append(frame)
    return out


def _select(
    pairs: Any, runs: Any, queries: Any, docs: Any, skip_judged: Any, args: argparse.Namespace
) -> _Job:
    if pairs is not None:
        if runs is not None:
            raise InputError("give pairs= or runs=, not both")
        if not isinstance(pairs, pd.DataFrame):
            raise InputError("pairs= takes a DataFrame", hint="query_id, doc_id, query, text")
        selected, texts = pairs_from_table(pairs, docs)
        return _Job(args, PairSelection(pairs=selected, candidates=len(selected)), texts)
    if runs is None:
        raise InputError("give pairs= (ids and texts) or runs= with queries= and docs=")
    queries = queries if queries is not None else queries_in_runs(runs)
    if queries is None or docs is None:
        raise InputError(
            "runs= needs queries= and docs=",
            hint="paths, dicts, DataFrames or an ir_datasets dataset",
        )
    lexical = judge_kind(args.judge).needs_all_docs
    texts = all_docs(docs) if lexical else {}
    skips = (
        []
        if skip_judged is None
        else skip_judged
        if isinstance(skip_judged, list)
        else [skip_judged]
    )
    selection = pairs_to_grade(
        _runs(runs),
        queries_of(queries),
        texts if lexical else docs_of(docs),
        depth=args.depth,
        skip_judged=[str(s) if is_path(s) else grades_table(s, "skip_judged") for s in skips],
        skip_missing=args.skip_missing,
    )
    job = _Job(args, selection, texts)
    if selection.missing:
        job.notes.append(f"skipped {selection.missing} pairs with unknown ids")
    return job


def _outcome(job: _Job, report: GradingReport, pressed: bool) -> pd.DataFrame:
    """The frame of a finished run; what the command says on stderr as warnings, and its
    exit codes as exceptions (KeyboardInterrupt for 130, BudgetError for 3)."""
    from grader.cli.grade_summary import summary_line

    args = job.args
    warn(job.notices, stacklevel=4)  # the library never prints: the server's notices warn
    if report.interrupted or pressed:
        raise KeyboardInterrupt(
            f"interrupted: {report.done()} of {report.pairs} pairs done and stored; "
            "to resume, call again with the same arguments (stored answers are reused)"
        )
    if report.budget_reached:
        raise BudgetError(
            f"stopped before exceeding max_cost ${args.max_cost:g}: spent ${report.cost:.4f}, "
            f"{report.done()} of {report.pairs} pairs done and stored, {report.pending} left. "
            "Call again with a higher max_cost to finish (stored answers cost nothing)"
        )
    lines = []
    if report.held_elsewhere:
        lines.append(
            f"{report.held_elsewhere} pairs are being graded by another process sharing the "
            f"store ({args.store}) that has not answered them; {report.done()} of "
            f"{report.pairs} pairs done and stored; call again once that process is done"
        )
    if report.failed:
        from grader.cli.failed_pairs import failed_pairs_text, failure_causes_text

        lines += [failure_causes_text(report.judgments), failed_pairs_text(report.judgments)]
    warn([line for line in lines if line], stacklevel=4)
    frame = judgments_table(report)
    frame.attrs["summary"] = summary_line(report)
    frame.attrs["notes"] = list(job.notes)
    frame.attrs["answers_by_server"] = dict(report.answers_by_server)
    return frame


def grade(
    pairs: pd.DataFrame | None = None,
    *,
    runs: Any = None,
    queries: Any = None,
    docs: Any = None,
    depth: int = 10,
    skip_judged: Any = None,
    model: str | list[str] | None = None,
    judge: str = "llm",
    prompt: str | None = None,
    base_url: str | list[str] | None = None,
    store: Any = "relgrade.db",
    concurrency: int = defaults.CONCURRENCY,
    progress: bool = True,
    **options: Any,
) -> pd.DataFrame:
    """Grade pairs, as `relgrade grade` does: the store first (a rerun sends no request), then
    the judge; a DataFrame of judgments in pair order.

    Give `pairs` (a DataFrame `query_id, doc_id, query, text`, or PyTerrier's `qid, docno,
    query, text`), or `runs` (as `evaluate` takes them; a PyTerrier frame brings its `query`
    column) with `queries` and `docs` (paths, dicts, DataFrames or an ir_datasets dataset):
    the top `depth` of each run, less `skip_judged` qrels. `judge="lexical"` grades offline;
    the LLM judge takes `model` (several: an ensemble), `base_url` (a list: requests spread over
    those servers, `attrs["answers_by_server"]` counts each one's replies; a dead one is dropped
    with a RelgradeWarning) and `$OPENAI_API_KEY` as the command does. `options` are grade's
    other flags by name (`max_cost`, `timeout`, `max_attempts`, `rpm`, `tpm`, `verify_low`,
    `lexical_config`, `skip_missing`, ...).
    Works where an event loop runs (Jupyter): the grading gets a thread and a loop of its own.
    Failed pairs are rows with status "failed" and no grade, said with a RelgradeWarning;
    KeyboardInterrupt stops the run cleanly (the store keeps every answer; call again to
    resume) and is raised.

    >>> import relgrade as rg, pandas as pd
    >>> pairs = pd.DataFrame({"query_id": ["q1"], "doc_id": ["d1"],
    ...                       "query": ["sort a list"], "text": ["def sort_list(xs): ..."]})
    >>> rg.grade(pairs, judge="lexical", store="doc.db", progress=False).status.tolist()
    ['ok']
    """
    job = _job(locals())  # first thing: locals() holds the arguments only
    from grader.cli.progress_line import progress_for_api
    from grader.grading.blocking import run_blocking

    with progress_for_api(progress) as bar:
        report, pressed = run_blocking(lambda stop: job.graded(bar, stop))
    return _outcome(job, report, pressed)


async def agrade(
    pairs: pd.DataFrame | None = None,
    *,
    runs: Any = None,
    queries: Any = None,
    docs: Any = None,
    depth: int = 10,
    skip_judged: Any = None,
    model: str | list[str] | None = None,
    judge: str = "llm",
    prompt: str | None = None,
    base_url: str | list[str] | None = None,
    store: Any = "relgrade.db",
    concurrency: int = defaults.CONCURRENCY,
    progress: bool = True,
    **options: Any,
) -> pd.DataFrame:
    """`grade` for async code: `await rg.agrade(...)` grades in the running event loop.

    >>> import asyncio, relgrade as rg, pandas as pd
    >>> pairs = pd.DataFrame({"qid": ["q1"], "docno": ["d1"], "query": ["sort"],
    ...                       "text": ["sort a list"]})
    >>> asyncio.run(rg.agrade(pairs, judge="lexical", store="doc.db", progress=False)).grade
    ... # doctest: +SKIP
    """
    job = _job(locals())  # first thing: locals() holds the arguments only
    from grader.cli.progress_line import progress_for_api

    with progress_for_api(progress) as bar:
        report = await job.graded(bar, None)
    return _outcome(job, report, False)
