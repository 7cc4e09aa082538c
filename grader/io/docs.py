"""Document files: JSONL or TSV, told apart by content (a first line starting with `{` is JSONL).

JSONL: id from `doc_id`/`docid`/`id`, text from `text`/`doc`/`contents`, optional `title`; other
fields (and a `metadata` object) go to `Doc.metadata`, so a `Doc.model_dump()` line reads back.
TSV: `docid<TAB>text` or `docid<TAB>title<TAB>text`, the first line fixing the width (a stray TAB
is caught); a header line is skipped. `ids` keeps only those documents (all lines are checked).
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

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
from grader.models import Doc

DOC_ID_FIELDS = ("doc_id", "docid", "id")
DOC_TEXT_FIELDS = ("text", "doc", "contents")
_EXAMPLE = (
    'one document per line: {"doc_id": ..., "text": ...} (JSONL), '
    "`docid<TAB>text` or `docid<TAB>title<TAB>text` (TSV)"
)


def read_docs(path: str | Path, *, ids: Collection[str] | None = None) -> dict[str, Doc]:
    """Documents of a JSONL or TSV file keyed by doc id, in file order (only `ids` when given)."""
    fmt = sniff_format(path)
    if fmt is None:
        raise empty_file_error(path, "documents", _EXAMPLE)
    wanted = set(ids) if ids is not None else None
    docs = _read_jsonl(path, wanted) if fmt == "jsonl" else _read_tsv(path, wanted)
    if not docs and wanted is None:
        raise empty_file_error(path, "documents", _EXAMPLE)
    return docs


def _jsonl_doc(record: dict[str, Any], path: str | Path, n: int) -> Doc:
    id_field, raw_id = pick_field(record, DOC_ID_FIELDS, path=path, lineno=n, what="doc id")
    text_field, raw_text = pick_field(
        record, DOC_TEXT_FIELDS, path=path, lineno=n, what="document text"
    )
    doc_id = as_id(raw_id, path=path, lineno=n, what="doc id")
    text = as_text(raw_text, path=path, lineno=n, what="document text")
    title = record.get("title")
    if title is not None:
        title = as_text(title, path=path, lineno=n, what="title")
    metadata: dict[str, Any] = {}
    if "metadata" in record:
        nested = record["metadata"]
        if not isinstance(nested, dict):
            raise InputError(
                f'"metadata" must be an object, found {type(nested).__name__}', path=path, line=n
            )
        metadata.update(nested)
    for name, value in record.items():
        if name not in (id_field, text_field, "title", "metadata"):
            metadata[name] = value
    return Doc(doc_id=doc_id, text=text, title=title, metadata=metadata)


def _read_jsonl(path: str | Path, wanted: set[str] | None) -> dict[str, Doc]:
    docs: dict[str, Doc] = {}
    seen: dict[str, int] = {}
    for n, line in content_lines(path):
        doc = _jsonl_doc(parse_json_object(path, n, line), path, n)
        if wanted is not None and doc.doc_id not in wanted:
            continue
        check_duplicate(seen, doc.doc_id, path=path, lineno=n, what="doc id")
        docs[doc.doc_id] = doc
    return docs


def _is_header(cells: list[str]) -> bool:
    names = [c.strip().lower() for c in cells]
    return (
        len(names) in (2, 3)
        and names[0] in DOC_ID_FIELDS
        and names[-1] in DOC_TEXT_FIELDS
        and (len(names) == 2 or names[1] == "title")
    )


def _read_tsv(path: str | Path, wanted: set[str] | None) -> dict[str, Doc]:
    docs: dict[str, Doc] = {}
    seen: dict[str, int] = {}
    width: int | None = None
    for n, line in content_lines(path):
        cells = line.split("\t")
        if width is None:
            if len(cells) not in (2, 3):
                raise InputError(
                    f"expected 2 (docid, text) or 3 (docid, title, text) tab-separated columns, "
                    f"found {len(cells)}",
                    path=path,
                    line=n,
                )
            width = len(cells)
            if _is_header(cells):
                continue
        elif len(cells) != width:
            layout = "docid, text" if width == 2 else "docid, title, text"
            raise InputError(
                f"expected {width} tab-separated columns ({layout}) like the first line, "
                f"found {len(cells)}",
                path=path,
                line=n,
                hint="a TAB inside a text shifts the columns; replace it with a space",
            )
        doc_id = cells[0].strip()
        if not doc_id:
            raise InputError("doc id is empty", path=path, line=n)
        if wanted is not None and doc_id not in wanted:
            continue
        check_duplicate(seen, doc_id, path=path, lineno=n, what="doc id")
        title = (cells[1].strip() or None) if width == 3 else None
        docs[doc_id] = Doc(doc_id=doc_id, text=cells[-1], title=title)
    return docs
