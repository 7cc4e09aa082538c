"""`relgrade.grade` and `relgrade.agrade`: the grade job (`grader.job.grade`) for notebooks and
async code; its keywords are grade's options (`grader.job.options`). Pairs come as a DataFrame
with their texts (or a PyTerrier frame's queries), judgments leave as a DataFrame."""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec

import pandas as pd

from grader import defaults
from grader.errors import BudgetError, InputError
from grader.grading.events import StopButton
from grader.grading.pairs import Pair, PairSelection, make_pairs
from grader.grading.report import GradingReport
from grader.io.docs import docs_of, queries_of
from grader.io.python_inputs import (
    DOC_ID,
    QUERY_ID,
    check_texts,
    find_columns,
    grades_table,
    id_text,
    is_path,
    one_text_per_id,
    run_inputs,
    run_table,
)
from grader.job.grade import GradeJob, GradeResult, Outcome, Tell
from grader.job.options import options_from
from grader.job.summary import busy_text, summary_line
from grader.models import Doc, Query
from relgrade._evaluate import warn

AGAIN = "call again with the same arguments (stored answers are reused)"
P = ParamSpec("P")


class _Call:
    """One call's job, and what it said: notes (kept) and notices (warned)."""

    def __init__(self, given: dict[str, Any]) -> None:
        self.notes: list[str] = []
        self.notices: list[str] = []
        given = dict(given)
        pairs, docs = given.pop("pairs"), given["docs"]
        selection = None
        if pairs is not None:
            if given["runs"] is not None:
                raise InputError("give pairs= or runs=, not both")
            if not isinstance(pairs, pd.DataFrame):
                raise InputError("pairs= takes a DataFrame", hint="query_id, doc_id, query, text")
            chosen, texts = pairs_from_table(pairs, docs)
            selection = (PairSelection(pairs=chosen, candidates=len(chosen)), texts)
        elif given["runs"] is None:
            raise InputError("give pairs= (ids and texts) or runs= with queries= and docs=")
        self.tell = Tell(
            say=self.notes.append,
            notice=self.notices.append,
            busy=lambda event: self.notices.append(busy_text(event)),
        )
        from calibration.spotcheck import also_judged

        self.job = GradeJob(options_from(_options(given)), also_judged, self.tell, selection)

    def frame(self, result: GradeResult, pressed: bool) -> pd.DataFrame:
        """The frame of a finished job; what the command says on stderr as warnings, and its
        exit codes as exceptions (KeyboardInterrupt for 130, BudgetError for 3)."""
        report = result.report
        warn(self.notices, stacklevel=4)
        if pressed:
            result.outcome = Outcome.INTERRUPTED
        text = result.outcome_text(AGAIN)
        if result.outcome is Outcome.INTERRUPTED:
            raise KeyboardInterrupt(text)
        if result.outcome is Outcome.BUDGET:
            raise BudgetError(text)
        warn([line for line in (result.causes_text(), text) if line], stacklevel=4)
        frame = judgments_table(report)
        frame.attrs["summary"] = summary_line(report)
        frame.attrs["notes"] = [*self.notes, *filter(None, [result.holes_text()])]
        frame.attrs["answers_by_server"] = dict(report.answers_by_server)
        return frame


def _options(given: dict[str, Any]) -> dict[str, Any]:
    """grade's options from the keywords: runs, skip_judged and model as lists, progress as
    quiet, the other keywords by their names."""
    options = given.pop("options")
    runs, queries, skip = given.pop("runs"), given.pop("queries"), given.pop("skip_judged")
    model, prompt, progress = given.pop("model"), given.pop("prompt"), given.pop("progress")
    if runs is not None and queries is None:
        queries = queries_in_runs(runs)
    skips = [] if skip is None else skip if isinstance(skip, list) else [skip]
    return {
        **given,
        "run": _runs(runs) if runs is not None else [],
        "queries": queries,
        "skip_judged": [str(s) if is_path(s) else grades_table(s, "skip_judged") for s in skips],
        "model": [] if model is None else [model] if isinstance(model, str) else list(model),
        "prompt": defaults.PROMPT if prompt is None else prompt,
        "store": str(given["store"]),
        "quiet": not progress,
        **options,
    }


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


def grade(
    pairs: pd.DataFrame | None = None,
    *,
    runs: Any = None,
    queries: Any = None,
    docs: Any = None,
    depth: int = defaults.DEPTH,
    skip_judged: Any = None,
    model: str | list[str] | None = None,
    judge: str = defaults.JUDGE,
    prompt: str | None = None,
    base_url: str | list[str] | None = None,
    store: Any = defaults.STORE,
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
    `judge_config`, `skip_missing`, `logprobs`, `out`, `qrels_out`, ...).
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
    call = _Call(locals())  # first thing: locals() holds the arguments only
    from grader.display.progress import progress_for_api
    from grader.grading.events import run_blocking

    def graded(stop: StopButton) -> Any:
        return call.job.run(stop=stop)

    with progress_for_api(progress) as call.tell.progress:
        result, pressed = run_blocking(graded)
    return call.frame(result, pressed)


def _arguments_of(
    sync: Callable[P, pd.DataFrame],
) -> Callable[[Callable[..., Awaitable[pd.DataFrame]]], Callable[P, Awaitable[pd.DataFrame]]]:
    """An async twin takes `sync`'s arguments: for type checkers, help() and IDEs."""

    def typed(twin: Callable[..., Any]) -> Any:
        twin.__signature__ = inspect.signature(sync)  # type: ignore[attr-defined]
        return twin

    return typed


@_arguments_of(grade)
async def agrade(*args: Any, **kwargs: Any) -> pd.DataFrame:
    """`grade` for async code, with grade's arguments: `await rg.agrade(...)` grades in the
    running event loop.

    >>> import asyncio, relgrade as rg, pandas as pd
    >>> pairs = pd.DataFrame({"qid": ["q1"], "docno": ["d1"], "query": ["sort"],
    ...                       "text": ["sort a list"]})
    >>> asyncio.run(rg.agrade(pairs, judge="lexical", store="doc.db", progress=False)).grade
    ... # doctest: +SKIP
    """
    bound = inspect.signature(grade).bind(*args, **kwargs)
    bound.apply_defaults()
    call = _Call(bound.arguments)
    from grader.display.progress import progress_for_api

    with progress_for_api(bound.arguments["progress"]) as call.tell.progress:
        result = await call.job.run()
    return call.frame(result, False)


# The first columns of a judgments table; the rest follow the judgments JSONL's order.
COLUMNS = ["query_id", "doc_id", "grade", "status", "reason", "judge", "prompt"]


def pairs_from_table(pairs: pd.DataFrame, docs: Any = None) -> tuple[list[Pair], dict[str, Doc]]:
    """Pairs given with their texts (or without a `text` column, `docs`' texts)."""
    names = {"query_id": QUERY_ID, "doc_id": DOC_ID, "query": ("query",), "text": ("text",)}
    if "text" not in pairs.columns and docs is not None:
        did = next((c for c in DOC_ID if c in pairs.columns), None)
        if did is not None:
            ids = id_text(pairs[did], "pairs DataFrame")
            source = docs_of(docs)
            loaded = source(set(ids)) if callable(source) else source
            texts = {d: doc.text for d, doc in loaded.items()}
            pairs = pairs.assign(text=ids.map(texts))
            if pairs["text"].isna().any():
                missing = pairs.loc[pairs["text"].isna(), did].iloc[0]
                raise InputError(f"no text for doc {missing!r} in docs=", hint="give every doc")
    expected = "query_id, doc_id, query, text (or PyTerrier's qid, docno, query, text)"
    cols = list(find_columns(pairs, names, "pairs DataFrame", expected).values())
    pairs = pairs.reset_index(drop=True)  # rows are named by their place
    pairs = pairs.assign(**{c: id_text(pairs[c], "pairs DataFrame") for c in cols[:2]})
    check_texts(pairs, cols[2:], "pairs DataFrame")
    for id_col, text_col in zip(cols[:2], cols[2:], strict=True):
        one_text_per_id(pairs[id_col], pairs[text_col], "pairs DataFrame")
    rows = pairs[cols].astype(str).drop_duplicates(subset=cols[:2]).itertuples(index=False)
    queries: dict[str, Query] = {}
    by_id: dict[str, Doc] = {}
    for qid, did, query, text in rows:
        queries.setdefault(qid, Query(query_id=qid, text=query))
        by_id.setdefault(did, Doc(doc_id=did, text=text))
    keys = list(pairs[cols[:2]].drop_duplicates().itertuples(index=False))
    return make_pairs((queries[q] for q, _ in keys), (by_id[d] for _, d in keys)), by_id


def queries_in_runs(runs: Any) -> dict[str, Query] | None:
    """The `query` column of PyTerrier run frames, as the queries when none are given."""
    found: dict[str, Query] = {}
    for _, run in run_inputs(runs):
        if isinstance(run, pd.DataFrame) and "query" in run.columns:
            qid = next((c for c in QUERY_ID if c in run.columns), None)
            if qid is not None:
                found.update(queries_of(run[[qid, "query"]].drop_duplicates(subset=[qid])))
    return found or None


def judgments_table(report: GradingReport) -> pd.DataFrame:
    """Every output judgment in pair order, one row each as `--out` writes it: `grade` nullable
    (never 0 for a failure), `prompt` as `name@version`, `error` as `Type: message`."""
    records = [json.loads(line) for block in report.blocks() for line in block.lines.splitlines()]
    for record in records:
        prompt = record.get("prompt")
        record["prompt"] = f"{prompt['name']}@{prompt['version']}" if prompt else None
        error = record.get("error")
        record["error"] = f"{error['type']}: {error['message']}" if error else None
        usage = record.pop("usage", None) or {}
        for name in ("prompt_tokens", "completion_tokens", "cached_tokens"):
            record[name] = usage.get(name, 0)
    frame = pd.DataFrame.from_records(records)
    if frame.empty:
        frame = pd.DataFrame(columns=COLUMNS)
    frame["grade"] = frame["grade"].astype("Int64")
    others = [c for c in frame.columns if c not in COLUMNS]
    return frame[COLUMNS + others]
