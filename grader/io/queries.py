"""Query files: TSV (`qid<TAB>text`) or JSONL (`query_id`/`qid`/`id` and `text`/`query`).

The format is told by content, not by name: a first non-blank line starting with `{` means JSONL.
A TSV may open with a header line `qid<TAB>text` (or `query_id`/`id`, `query`), which is skipped.
Blank lines are ignored. Every other problem (a missing column, an empty text, the same id twice,
an empty file) is an `InputError` naming the file and line. `.gz` is read transparently.
"""

from __future__ import annotations

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
from grader.models import Query

QUERY_ID_FIELDS = ("query_id", "qid", "id")
QUERY_TEXT_FIELDS = ("text", "query")
_EXAMPLE = 'one query per line: `qid<TAB>text` (TSV) or {"query_id": ..., "text": ...} (JSONL)'


def read_queries(path: str | Path) -> dict[str, Query]:
    """All queries of a TSV or JSONL file, keyed by query id, in file order."""
    fmt = sniff_format(path)
    if fmt is None:
        raise empty_file_error(path, "queries", _EXAMPLE)
    queries = _read_jsonl(path) if fmt == "jsonl" else _read_tsv(path)
    if not queries:
        raise empty_file_error(path, "queries", _EXAMPLE)
    return queries


def _add(
    queries: dict[str, Query], seen: dict[str, int], qid: str, text: str, path: str | Path, n: int
) -> None:
    check_duplicate(seen, qid, path=path, lineno=n, what="query id")
    if not text.strip():
        raise InputError(f"query {qid!r} has an empty text", path=path, line=n)
    queries[qid] = Query(query_id=qid, text=text)


def _read_jsonl(path: str | Path) -> dict[str, Query]:
    queries: dict[str, Query] = {}
    seen: dict[str, int] = {}
    for n, line in content_lines(path):
        record = parse_json_object(path, n, line)
        _, raw_id = pick_field(record, QUERY_ID_FIELDS, path=path, lineno=n, what="query id")
        _, raw_text = pick_field(record, QUERY_TEXT_FIELDS, path=path, lineno=n, what="query text")
        qid = as_id(raw_id, path=path, lineno=n, what="query id")
        text = as_text(raw_text, path=path, lineno=n, what="query text")
        _add(queries, seen, qid, text, path, n)
    return queries


def _is_header(cells: list[str]) -> bool:
    return (
        len(cells) == 2
        and cells[0].strip().lower() in QUERY_ID_FIELDS
        and cells[1].strip().lower() in QUERY_TEXT_FIELDS
    )


def _read_tsv(path: str | Path) -> dict[str, Query]:
    queries: dict[str, Query] = {}
    seen: dict[str, int] = {}
    first = True
    for n, line in content_lines(path):
        cells = line.split("\t")
        if first and _is_header(cells):
            first = False
            continue
        first = False
        if len(cells) != 2:
            raise InputError(
                f"expected 2 tab-separated columns (qid, text), found {len(cells)}",
                path=path,
                line=n,
                hint="separate id and text by one TAB; the text itself must not hold a TAB",
            )
        qid = cells[0].strip()
        if not qid:
            raise InputError("query id is empty", path=path, line=n)
        _add(queries, seen, qid, cells[1].strip(), path, n)
    return queries
