"""Query and document texts as people hold them: a file, a mapping, a DataFrame, or an ir_datasets
dataset or its namedtuples (text from `default_text()`, else the `text` field)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from grader.errors import InputError
from grader.io.datasets import downloading, iterate
from grader.io.python_inputs import DOC_ID, QUERY_ID, check_texts, id_text, is_path, one_text_per_id
from grader.models import Doc, Query

QUERY_TEXT = ("text", "query")
DOC_TEXT = ("text", "body", "contents", "doc")


def record_text(record: Any) -> str:
    """The text of an ir_datasets query or document namedtuple."""
    default = getattr(record, "default_text", None)
    if callable(default):
        return str(default())
    text = getattr(record, "text", None)
    if text is None:
        raise InputError(
            f"a {type(record).__name__} has no text field",
            hint="give records with a text field or default_text() (ir_datasets)",
        )
    return str(text)


def _pick(frame: pd.DataFrame, names: tuple[str, ...], what: str, expected: str) -> str:
    found = next((n for n in names if n in frame.columns), None)
    if found is None:
        raise InputError(
            f"the {what} has columns {', '.join(map(str, frame.columns)) or '(none)'}; "
            f"expected {expected}",
            hint="rename the columns, e.g. frame.rename(columns={...})",
        )
    return found


def queries_of(value: Any) -> dict[str, Query]:
    """Queries by id from a path (TSV or JSONL), a mapping id -> text (or Query), a DataFrame
    (`query_id|qid`, `text|query`), an ir_datasets dataset or its query namedtuples."""
    if is_path(value):
        from grader.io.docs import read_queries

        return read_queries(value)
    if hasattr(value, "queries_iter"):
        value = iterate(value, "queries")
    if isinstance(value, pd.DataFrame):
        expected = "query_id (or qid) and text (or query)"
        qid = _pick(value, QUERY_ID, "queries DataFrame", expected)
        text = _pick(value, QUERY_TEXT, "queries DataFrame", expected)
        value = value.reset_index(drop=True)  # rows are named by their place
        ids = id_text(value[qid], "queries DataFrame")
        check_texts(value, [text], "queries DataFrame")
        one_text_per_id(ids, value[text], "queries DataFrame")
        return {q: Query(query_id=q, text=str(t)) for q, t in zip(ids, value[text], strict=True)}
    if isinstance(value, Mapping):
        return {
            str(q): t if isinstance(t, Query) else Query(query_id=str(q), text=str(t))
            for q, t in value.items()
        }
    if isinstance(value, Iterable):
        return {
            str(r.query_id): Query(query_id=str(r.query_id), text=record_text(r)) for r in value
        }
    raise InputError(f"queries given as a {type(value).__name__}", hint=QUERIES_HINT)


QUERIES_HINT = "give a path, a dict {query_id: text}, a DataFrame or an ir_datasets dataset"
DOCS_HINT = "give a path, a dict {doc_id: text}, a DataFrame or an ir_datasets dataset"


def _doc(doc_id: Any, value: Any) -> Doc:
    if isinstance(value, Doc):
        return value
    if hasattr(value, "_fields"):
        title = getattr(value, "title", None)
        return Doc(doc_id=str(doc_id), text=record_text(value), title=title or None)
    return Doc(doc_id=str(doc_id), text=str(value))


def docs_of(value: Any) -> dict[str, Doc] | Callable[[set[str]], dict[str, Doc]]:
    """Documents by id, or a loader of the ids asked for (a file, a dataset's docs_store:
    a large collection is not read whole). Same inputs as `queries_of`, columns
    `doc_id|docno` and `text|body|contents|doc` (optional `title`)."""
    if is_path(value):
        from grader.io.docs import read_docs

        path = Path(value)
        return lambda ids: read_docs(path, ids=ids)
    if hasattr(value, "docs_store"):
        with downloading(value, "docs"):
            store = value.docs_store()
        return partial(_from_docs_store, value, store)
    return all_docs(value)


def _from_docs_store(dataset: Any, store: Any, ids: set[str]) -> dict[str, Doc]:
    """The documents `ids` of a dataset's docs_store (downloaded and indexed on first use)."""
    with downloading(dataset, "docs"):
        found = store.get_many(ids)
    return {d: _doc(d, r) for d, r in found.items()}


def all_docs(value: Any, ids: Collection[str] | None = None) -> dict[str, Doc]:
    """Every document (the lexical judge's collection statistics need them all)."""
    if is_path(value):
        from grader.io.docs import read_docs

        return read_docs(value, ids=ids)
    if hasattr(value, "docs_iter"):
        value = iterate(value, "docs")
    if isinstance(value, pd.DataFrame):
        expected = "doc_id (or docno) and text (or body, contents, doc)"
        did = _pick(value, DOC_ID, "docs DataFrame", expected)
        text = _pick(value, DOC_TEXT, "docs DataFrame", expected)
        value = value.reset_index(drop=True)  # rows are named by their place
        titles = value["title"] if "title" in value.columns else [None] * len(value)
        ids = id_text(value[did], "docs DataFrame")
        check_texts(value, [text], "docs DataFrame")
        one_text_per_id(ids, value[text], "docs DataFrame")
        return {
            d: Doc(doc_id=d, text=str(t), title=None if pd.isna(h) else str(h))
            for d, t, h in zip(ids, value[text], titles, strict=True)
        }
    if isinstance(value, Mapping):
        return {str(d): _doc(d, v) for d, v in value.items()}
    if isinstance(value, Iterable):
        return {str(r.doc_id): _doc(r.doc_id, r) for r in value}
    raise InputError(f"docs given as a {type(value).__name__}", hint=DOCS_HINT)
