"""The pairs a grade job grades: the top `depth` of each run, less the pairs `skip_judged`
qrels grade, with the texts of its queries and documents (files, or an ir_datasets id)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from grader.errors import InputError
from grader.grading.pairs import PairSelection, pairs_to_grade
from grader.job import people
from grader.job.options import GradeOptions
from grader.judges.registry import judge_kind
from grader.spelling import option


def _texts(o: GradeOptions) -> tuple[Any, Any]:
    """Where the queries and the documents come from: as given, else `dataset`'s."""
    queries, docs = o.queries, o.docs
    if (queries is None or docs is None) and o.dataset:
        from grader.io.datasets import load_dataset, require

        dataset = load_dataset(o.dataset)
        for part, given in (("queries", queries), ("docs", docs)):
            if given is None:
                require(dataset, o.dataset, part)
        queries = dataset if queries is None else queries
        docs = dataset if docs is None else docs
    if queries is None or docs is None:
        raise InputError(
            option("grade needs --queries and --docs", "runs= needs queries= and docs="),
            hint=option(
                "or --dataset ID (an ir_datasets id)",
                "paths, dicts, DataFrames or an ir_datasets dataset",
            ),
        )
    return queries, docs


def select_pairs(
    o: GradeOptions, plan: people.Plan | None, say: Callable[[str], None]
) -> tuple[PairSelection, dict[str, Any]]:
    """The pairs the options select, and the docs the lexical judge needs (all of them)."""
    from grader.io.texts import all_docs, docs_of, queries_of

    queries, docs = _texts(o)
    # The lexical judge's collection statistics need every document; an LLM judge needs only
    # those of the selected pairs, so a large docs file (or collection) is streamed and the
    # rest not kept.
    lexical = judge_kind(o.judge).needs_all_docs
    texts = all_docs(docs) if lexical else {}
    selection = pairs_to_grade(
        o.run,
        queries_of(queries),
        texts if lexical else docs_of(docs),
        depth=o.depth,
        skip_judged=[] if plan is not None else o.skip_judged,
        skip_missing=o.skip_missing,
        **people.selection_kwargs(plan),
    )
    if plan is not None:
        people.take_selection(plan, selection)
    if selection.missing:
        say(f"skipped {selection.missing} pairs with unknown ids")
    return selection, texts
