"""Queries and documents: files (JSONL or TSV, told apart by a first line starting with `{`), and
as people hold them in Python (mappings, DataFrames, ir_datasets datasets or namedtuples).

JSONL fields have aliases (`*_ID_FIELDS`, `*_TEXT_FIELDS`); a document's other fields go to
`Doc.metadata`, so a `Doc.model_dump()` line reads back. TSV: `qid<TAB>text`, `docid<TAB>text` or
`docid<TAB>title<TAB>text` (the first line fixes the width), a header line skipped."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any, cast

import pandas as pd

from grader.errors import InputError
from grader.io.datasets import downloading, iterate
from grader.io.files import content_lines, empty_file_error, parse_json_object, twice_error
from grader.io.python_inputs import DOC_ID, QUERY_ID, frame_texts, is_path
from grader.models import Doc, Query

QUERY_ID_FIELDS = ("query_id", "qid", "id")
QUERY_TEXT_FIELDS = ("text", "query")
DOC_ID_FIELDS = ("doc_id", "docid", "id")
DOC_TEXT_FIELDS = ("text", "doc", "contents")
_FIELDS = {"query": (QUERY_ID_FIELDS, QUERY_TEXT_FIELDS), "doc": (DOC_ID_FIELDS, DOC_TEXT_FIELDS)}
_LAYOUTS = {"query": {2: "qid, text"}, "doc": {2: "docid, text", 3: "docid, title, text"}}
_EXAMPLES = {
    "query": 'one query per line: `qid<TAB>text` (TSV) or {"query_id": ..., "text": ...} (JSONL)',
    "doc": 'one document per line: {"doc_id": ..., "text": ...} (JSONL), '
    "`docid<TAB>text` or `docid<TAB>title<TAB>text` (TSV)",
}


def read_queries(path: str | Path) -> dict[str, Query]:
    """All queries of a TSV or JSONL file, keyed by query id, in file order."""
    queries = {q.query_id: q for q in _read(path, "query", None) if isinstance(q, Query)}
    if not queries:
        raise empty_file_error(path, "queries", _EXAMPLES["query"])
    return queries


def read_docs(path: str | Path, *, ids: Collection[str] | None = None) -> dict[str, Doc]:
    """Documents of a JSONL or TSV file by id, in file order: only `ids` if given (all checked)."""
    wanted = set(ids) if ids is not None else None
    docs = {d.doc_id: d for d in _read(path, "doc", wanted) if isinstance(d, Doc)}
    if not docs and wanted is None:
        raise empty_file_error(path, "documents", _EXAMPLES["doc"])
    return docs


def _read(path: str | Path, kind: str, wanted: set[str] | None) -> Iterator[Query | Doc]:
    """The queries or docs (`kind`) of a file, only `wanted` ids; an id twice names both lines."""
    first = next((line for _, line in content_lines(path)), None)
    if first is None:
        noun = "queries" if kind == "query" else "documents"
        raise empty_file_error(path, noun, _EXAMPLES[kind])
    seen: dict[str, int] = {}
    for n, item in _jsonl(path, kind) if first.lstrip().startswith("{") else _tsv(path, kind):
        key = item.query_id if isinstance(item, Query) else item.doc_id
        if wanted is not None and key not in wanted:
            continue
        if key in seen:
            raise twice_error(path, f"{kind} id {key!r}", seen[key], n, "keep one of them")
        seen[key] = n
        yield item


def _query(qid: str, text: str, path: str | Path, n: int) -> Query:
    if not text.strip():
        raise InputError(f"query {qid!r} has an empty text", path=path, line=n)
    return Query(query_id=qid, text=text)


def _jsonl(path: str | Path, kind: str) -> Iterator[tuple[int, Query | Doc]]:
    ids, texts = _FIELDS[kind]
    noun = "query" if kind == "query" else "document"
    for n, line in content_lines(path):
        record = parse_json_object(path, n, line)
        id_field, key = _field(record, ids, f"{kind} id", path, n)
        text_field, text = _field(record, texts, f"{noun} text", path, n)
        if kind == "query":
            yield n, _query(key, text, path, n)
            continue
        title = None
        if record.get("title") is not None:
            title = _field(record, ("title",), "title", path, n)[1]
        nested = record.get("metadata", {})
        if not isinstance(nested, dict):
            raise InputError(
                f'"metadata" must be an object, found {type(nested).__name__}', path=path, line=n
            )
        metadata = dict(nested)
        for name, value in record.items():
            if name not in (id_field, text_field, "title", "metadata"):
                metadata[name] = value
        yield n, Doc(doc_id=key, text=text, title=title, metadata=metadata)


def _field(
    record: dict[str, Any], names: tuple[str, ...], what: str, path: str | Path, n: int
) -> tuple[str, str]:
    """(name, value) of the first of `names` in `record`: a text, or for an id also an integer."""
    name = next((f for f in names if f in record), None)
    if name is None:
        choices = ", ".join(f'"{f}"' for f in names)
        raise InputError(f"no {what} field (expected one of {choices})", path=path, line=n)
    value, why = record[name], None
    if not what.endswith(" id"):
        why = None if isinstance(value, str) else f"a string, found {type(value).__name__}"
    elif isinstance(value, bool) or not isinstance(value, str | int):
        why = f"a string or an integer, found {json.dumps(value)[:40]}"
    elif not str(value).strip():
        raise InputError(f"{what} is empty", path=path, line=n)
    if why:
        raise InputError(f"{what} must be {why}", path=path, line=n)
    return name, str(value)


def _tsv(path: str | Path, kind: str) -> Iterator[tuple[int, Query | Doc]]:
    """The first line fixes the width (a stray TAB is caught); a header line is skipped."""
    layouts = _LAYOUTS[kind]
    width: int | None = None
    for n, line in content_lines(path):
        cells = line.split("\t")
        if width is None and len(cells) in layouts:
            width = len(cells)
            if _is_header(cells, kind):
                continue
        elif len(cells) != width:
            expected = (
                f"{width} tab-separated columns ({layouts[width]}) like the first line"
                if width
                else " or ".join(f"{w} ({cols})" for w, cols in layouts.items())
                + " tab-separated columns"
            )
            raise InputError(
                f"expected {expected}, found {len(cells)}",
                path=path,
                line=n,
                hint="a TAB inside a text shifts the columns; replace it with a space",
            )
        key = cells[0].strip()
        if not key:
            raise InputError(f"{kind} id is empty", path=path, line=n)
        if kind == "query":
            yield n, _query(key, cells[1].strip(), path, n)
        else:
            yield (
                n,
                Doc(
                    doc_id=key,
                    text=cells[-1],
                    title=(cells[1].strip() or None) if width == 3 else None,
                ),
            )


def _is_header(cells: list[str], kind: str) -> bool:
    names = [c.strip().lower() for c in cells]
    ids, texts = _FIELDS[kind]
    return names[0] in ids and names[-1] in texts and names[1:-1] in ([], ["title"])


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


def queries_of(value: Any) -> dict[str, Query]:
    """Queries by id from a path (TSV or JSONL), a mapping id -> text (or Query), a DataFrame
    (`query_id|qid`, `text|query`), an ir_datasets dataset or its query namedtuples."""
    return read_queries(value) if is_path(value) else cast(dict[str, Query], _items(value, "query"))


_SOURCES: dict[str, tuple[str, dict[str, tuple[str, ...]]]] = {  # ir_datasets part, columns
    "query": ("queries", {"query_id": QUERY_ID, "text": QUERY_TEXT_FIELDS}),
    "doc": ("docs", {"doc_id": DOC_ID, "text": ("text", "body", "contents", "doc")}),
}


def _items(value: Any, kind: str) -> dict[str, Query | Doc]:
    """Queries or documents (`kind`) by id from a value in Python (see `queries_of`)."""
    part, wanted = _SOURCES[kind]
    key = next(iter(wanted))
    if hasattr(value, f"{part}_iter"):
        value = iterate(value, part)
    if isinstance(value, pd.DataFrame):
        expected = " and ".join(f"{n[0]} (or {', '.join(n[1:])})" for n in wanted.values())
        ids, texts, value = frame_texts(value, wanted, f"{part} DataFrame", expected)
        titles = value["title"] if "title" in value.columns else [None] * len(value)
        return {i: _item(kind, i, t, h) for i, t, h in zip(ids, texts, titles, strict=True)}
    if isinstance(value, Mapping):
        return {str(k): _item(kind, k, v) for k, v in value.items()}
    if isinstance(value, Iterable):
        return {str(getattr(r, key)): _item(kind, getattr(r, key), r) for r in value}
    raise InputError(
        f"{part} given as a {type(value).__name__}",
        hint=f"give a path, a dict {{{key}: text}}, a DataFrame or an ir_datasets dataset",
    )


def _item(kind: str, key: Any, value: Any, title: Any = None) -> Query | Doc:
    """The Query or Doc of `key`: one made already, or of an ir_datasets namedtuple or a text."""
    if isinstance(value, Query | Doc):
        return value
    if hasattr(value, "_fields"):
        value, title = record_text(value), getattr(value, "title", None) or None
    if kind == "query":
        return Query(query_id=str(key), text=str(value))
    return Doc(doc_id=str(key), text=str(value), title=None if pd.isna(title) else str(title))


def docs_of(value: Any) -> dict[str, Doc] | Callable[[set[str]], dict[str, Doc]]:
    """Documents by id, or a loader of the ids asked for (a file, a dataset's docs_store:
    a large collection is not read whole). Same inputs as `queries_of`, columns
    `doc_id|docno` and `text|body|contents|doc` (optional `title`)."""
    if is_path(value):
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
    return cast(dict[str, Doc], {d: _item("doc", d, r) for d, r in found.items()})


def all_docs(value: Any, ids: Collection[str] | None = None) -> dict[str, Doc]:
    """Every document (the lexical judge's collection statistics need them all)."""
    return (
        read_docs(value, ids=ids) if is_path(value) else cast(dict[str, Doc], _items(value, "doc"))
    )
