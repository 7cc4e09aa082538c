"""Query and document files: JSONL or TSV, told apart by content (a first line starting with `{`).

JSONL fields have aliases (`*_ID_FIELDS`, `*_TEXT_FIELDS`); a document's other fields go to
`Doc.metadata`, so a `Doc.model_dump()` line reads back. TSV: `qid<TAB>text`, `docid<TAB>text` or
`docid<TAB>title<TAB>text` (the first line fixes the width), a header line skipped.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from pathlib import Path

from grader.errors import InputError
from grader.io._records import (
    as_id,
    as_text,
    check_duplicate,
    content_lines,
    empty_file_error,
    parse_json_object,
    pick_field,
    sniff_format,
)
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
    """Documents of a JSONL or TSV file keyed by doc id, in file order (only `ids` when given;
    every line is checked)."""
    wanted = set(ids) if ids is not None else None
    docs = {d.doc_id: d for d in _read(path, "doc", wanted) if isinstance(d, Doc)}
    if not docs and wanted is None:
        raise empty_file_error(path, "documents", _EXAMPLES["doc"])
    return docs


def _read(path: str | Path, kind: str, wanted: set[str] | None) -> Iterator[Query | Doc]:
    """The queries or docs (`kind`) of a file, only `wanted` ids when given; the same id twice
    names both lines."""
    fmt = sniff_format(path)
    if fmt is None:
        noun = "queries" if kind == "query" else "documents"
        raise empty_file_error(path, noun, _EXAMPLES[kind])
    seen: dict[str, int] = {}
    for n, item in _jsonl(path, kind) if fmt == "jsonl" else _tsv(path, kind):
        key = item.query_id if isinstance(item, Query) else item.doc_id
        if wanted is None or key in wanted:
            check_duplicate(seen, key, path=path, lineno=n, what=f"{kind} id")
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
        id_field, raw_id = pick_field(record, ids, path=path, lineno=n, what=f"{kind} id")
        text_field, raw_text = pick_field(record, texts, path=path, lineno=n, what=f"{noun} text")
        key = as_id(raw_id, path=path, lineno=n, what=f"{kind} id")
        text = as_text(raw_text, path=path, lineno=n, what=f"{noun} text")
        if kind == "query":
            yield n, _query(key, text, path, n)
            continue
        title = record.get("title")
        if title is not None:
            title = as_text(title, path=path, lineno=n, what="title")
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
