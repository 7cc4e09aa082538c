"""Grade tables `[query_id, doc_id, grade, ...]`: people's (CSV, qrels) and LLMs' (judgments).

The format is told by content (docs/file-formats.md). attrs count what gave no row: `ungraded`
(an empty CSV grade, never read as 0), `failed` judgments, `clamped` grades (with `clamp=True`)."""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd

from grader.errors import InputError
from grader.io.files import content_lines, empty_file_error, iter_lines, twice_error
from grader.io.grade_format import DISTRIBUTION_COLUMNS, clamp_hint
from grader.io.grade_format import HEADER_ALIASES as _HEADER_ALIASES
from grader.io.grade_format import REQUIRED as _REQUIRED
from grader.io.grade_format import looks_like_qrels as looks_like_qrels
from grader.io.judgments import iter_judgments
from grader.io.streams import allow_long_csv_fields
from grader.io.trec import read_qrels
from grader.models import GRADES, MAX_GRADE, MIN_GRADE

_HUMAN_EXAMPLE = (
    "a CSV with the header query_id,doc_id,grade, TREC qrels (qid 0 docid grade), or a "
    "judgments JSONL"
)


def _first_line(path: str | Path) -> str | None:
    """The first line neither blank nor a `#` comment, which tells the format."""
    for _, line in content_lines(path):
        if not line.lstrip().startswith("#"):
            return line
    return None


def read_human_grades(
    path: str | Path, *, clamp: bool = False, any_grade: bool = False
) -> pd.DataFrame:
    """Human grades from a CSV (`query_id,doc_id,grade`, more columns kept), TREC qrels or a
    judgments JSONL (its ok judgments; `attrs["failed"]` counts the others, never grades).
    `any_grade=True` takes any integer qrels grade, as trec_eval and `evaluate` do."""
    first = _first_line(path)
    if first is None:
        raise empty_file_error(path, "grades", _HUMAN_EXAMPLE)
    if first.lstrip().startswith("{"):
        frame = read_llm_grades(path, clamp=clamp)[["query_id", "doc_id", "grade"]]
    elif looks_like_qrels(first):
        frame = _qrels_frame(path, clamp, any_grade)
    else:
        delimiter = "\t" if "\t" in first and "," not in first else ","
        frame = _read_csv(path, clamp, delimiter)
    frame.attrs["path"] = str(path)
    return frame


def _qrels_frame(path: str | Path, clamp: bool, any_grade: bool = False) -> pd.DataFrame:
    frame = read_qrels(path, clamp=clamp, any_grade=any_grade)  # a first data line: never empty
    frame.attrs.update(source="qrels", ungraded=0)
    return frame


def _csv_rows(path: str | Path, delimiter: str) -> Iterator[tuple[int, list[str]]]:
    """(line number, cells) of every non-blank CSV record; quoted fields may span lines."""
    allow_long_csv_fields()
    lines = (line + "\n" for _, line in iter_lines(path))
    reader = csv.reader(lines, delimiter=delimiter, strict=True)
    try:
        for row in reader:
            if row and any(cell.strip() for cell in row):
                yield reader.line_num, row
    except csv.Error as exc:
        raise InputError(f"malformed CSV ({exc})", path=path, line=reader.line_num) from None


def _header(path: str | Path, lineno: int, row: list[str]) -> list[str]:
    names = [_HEADER_ALIASES.get(c.strip().lower(), c.strip().lower()) for c in row]
    missing = [c for c in _REQUIRED if c not in names]
    if missing:
        raise InputError(
            f"the CSV header lacks {', '.join(missing)} (found: {', '.join(row)})",
            path=path,
            line=lineno,
            hint="the first line must name the columns, e.g. query_id,doc_id,grade",
        )
    for name in names:
        if names.count(name) > 1:
            raise InputError(f"the CSV header names {name!r} twice", path=path, line=lineno)
    return names


def parse_grade(
    text: str, *, clamp: bool = False, path: str | Path, lineno: int | None
) -> tuple[int, bool]:
    """A grade cell as an int in 0..3 and whether it was clamped: "2", " 2 " and "2.0" are 2; NaN,
    infinities, fractions and words are errors; `clamp` moves an integer outside to the nearest end.
    """
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value != round(value):
        raise InputError(
            f"grade {text!r} is not an integer",
            path=path,
            line=lineno,
            hint=f"grades are integers {MIN_GRADE}..{MAX_GRADE}",
        )
    grade = int(value)
    if MIN_GRADE <= grade <= MAX_GRADE:
        return grade, False
    if not clamp:
        raise InputError(
            f"grade {text} is outside {MIN_GRADE}..{MAX_GRADE}",
            path=path,
            line=lineno,
            hint=clamp_hint(),
        )
    return min(MAX_GRADE, max(MIN_GRADE, grade)), True


def _read_csv(path: str | Path, clamp: bool, delimiter: str) -> pd.DataFrame:
    rows = _csv_rows(path, delimiter)
    first = next(rows, None)
    if first is None:
        raise empty_file_error(path, "grades", _HUMAN_EXAMPLE)
    header_line, header_row = first
    names = _header(path, header_line, header_row)
    columns: dict[str, list[Any]] = {name: [] for name in names}
    seen: dict[tuple[str, str], int] = {}
    clamped = ungraded = 0
    for n, row in rows:
        if len(row) != len(names):
            raise InputError(
                f"expected {len(names)} columns like the header, found {len(row)}",
                path=path,
                line=n,
                hint="quote a field that holds a comma",
            )
        cells = dict(zip(names, row, strict=True))
        qid, did = cells["query_id"].strip(), cells["doc_id"].strip()
        if not qid or not did:
            raise InputError("query_id and doc_id must not be empty", path=path, line=n)
        pair = (qid, did)
        if pair in seen:
            what = f"the pair ({qid}, {did})"
            raise twice_error(path, what, seen[pair], n, "keep one grade per pair")
        seen[pair] = n
        if not cells["grade"].strip():
            ungraded += 1
            continue
        grade, was_clamped = parse_grade(cells["grade"].strip(), clamp=clamp, path=path, lineno=n)
        clamped += was_clamped
        cells["query_id"], cells["doc_id"] = qid, did
        for name in names:
            columns[name].append(grade if name == "grade" else cells[name])
    if not columns["grade"]:
        what = f"all {ungraded} rows have an empty grade" if ungraded else "no grades"
        raise InputError(f"{what} in the file", path=path, hint=f"expected {_HUMAN_EXAMPLE}")
    frame = pd.DataFrame(columns)
    frame["grade"] = frame["grade"].astype("int64")
    for name in names:
        if name not in _REQUIRED:
            frame[name] = _maybe_numeric(frame[name])
    ordered = list(_REQUIRED) + [c for c in names if c not in _REQUIRED]
    frame = frame[ordered]
    frame.attrs.update(source="csv", clamped=clamped, ungraded=ungraded)
    return frame


def _maybe_numeric(column: pd.Series) -> pd.Series:
    """The column as numbers when every non-empty value is one (empty -> NaN), else as text."""
    stripped = column.astype(str).str.strip()
    numbers = pd.to_numeric(stripped.where(stripped != "", None), errors="coerce")
    if numbers.notna().sum() == (stripped != "").sum() and (stripped != "").any():
        return numbers
    return column.astype(str)


def read_llm_grades(
    path: str | Path, *, clamp: bool = False, judge: str | None = None
) -> pd.DataFrame:
    """LLM grades from a judgments JSONL (ok judgments only) or TREC qrels. `judge` keeps that
    judge's judgments only (a file mixing judges needs it); attrs `failed`, `clamped`, `ungraded`
    (0)."""
    first = _first_line(path)
    if first is None:
        raise empty_file_error(path, "grades", "a judgments JSONL or TREC qrels")
    if not first.lstrip().startswith("{"):
        frame = _qrels_frame(path, clamp)
        frame.attrs.update(failed=0, path=str(path))
        return frame
    rows, failed, clamped = _judgment_rows(path, clamp, judge)
    if not rows:
        what = f"all {failed} judgments failed" if failed else "no judgments"
        raise InputError(f"{what}; there are no grades to use", path=path)
    frame = pd.DataFrame(rows)
    frame["grade"] = frame["grade"].astype("int64")
    for optional in ("expected_grade", "confidence", *DISTRIBUTION_COLUMNS):
        if frame[optional].isna().all():
            frame = frame.drop(columns=optional)
        else:
            frame[optional] = frame[optional].astype("float64")
    frame.attrs.update(
        source="judgments", failed=failed, clamped=clamped, ungraded=0, path=str(path)
    )
    return frame


_JUDGMENT_COLUMNS = ("query_id", "doc_id", "grade", "judge", "expected_grade", "confidence")


def _judgment_rows(
    path: str | Path, clamp: bool, judge: str | None
) -> tuple[list[dict[str, Any]], int, int]:
    """(rows of the ok judgments, failed ones, clamped grades) of a judgments JSONL, by `judge`
    only when given; the same pair twice is an error naming both lines."""
    rows: list[dict[str, Any]] = []
    seen: dict[tuple[str, str], tuple[int, str]] = {}
    failed = 0
    clamped = 0
    judges: dict[str, int] = {}  # every judge id in the file, with its count of lines
    for n, j, moved in iter_judgments(path, clamp=clamp):
        judges[j.judge] = judges.get(j.judge, 0) + 1
        if judge is not None and j.judge != judge:
            continue
        clamped += moved
        pair = (j.query_id, j.doc_id)
        if pair in seen:
            first_line, first_judge = seen[pair]
            hint = "keep one judgment per pair"
            if first_judge != j.judge:
                hint = f"the file mixes judges {first_judge!r} and {j.judge!r}; pick one"
            raise twice_error(path, f"the pair ({j.query_id}, {j.doc_id})", first_line, n, hint)
        seen[pair] = (n, j.judge)
        if j.status != "ok":
            failed += 1
            continue
        row = {name: getattr(j, name) for name in _JUDGMENT_COLUMNS}
        row.update(zip(DISTRIBUTION_COLUMNS, j.distribution or [math.nan] * 4, strict=True))
        rows.append(row)
    if judge is not None and judge not in judges:
        present = ", ".join(f"{name!r} ({count} lines)" for name, count in sorted(judges.items()))
        raise InputError(
            f"no judgments by judge {judge!r}; the judges in the file are: {present or 'none'}",
            path=path,
            hint="give --judge one of these ids",
        )
    return rows, failed, clamped


IDENTITY_SCALE = {g: g for g in GRADES}


def parse_llm_scale(text: str) -> dict[int, int]:
    """`--llm-scale 0:0,1:1,2:2,3:3` as {llm grade: people's grade}, each LLM grade once."""
    scale: dict[int, int] = {}
    hint = "write LLM:HUMAN for each LLM grade 0..3, e.g. --llm-scale 0:0,1:1,2:2,3:3"
    for part in text.split(","):
        left, sep, right = part.strip().partition(":")
        try:
            llm, human = int(left), int(right)
        except ValueError:
            raise InputError(f"--llm-scale: {part.strip()!r} is not LLM:HUMAN", hint=hint) from None
        if not sep or llm not in GRADES:
            raise InputError(f"--llm-scale: {llm} is not an LLM grade (0..3)", hint=hint)
        if llm in scale:
            raise InputError(f"--llm-scale: grade {llm} is mapped twice", hint=hint)
        scale[llm] = human
    if set(scale) != set(GRADES):
        missing = ", ".join(str(g) for g in GRADES if g not in scale)
        raise InputError(f"--llm-scale: no mapping for LLM grade(s) {missing}", hint=hint)
    return scale


def scale_text(scale: dict[int, int]) -> str:
    """`0:0,1:1,2:2,3:3`, and whether that is the identity."""
    text = ",".join(f"{g}:{scale[g]}" for g in sorted(scale))
    return text + (" (identity)" if scale == IDENTITY_SCALE else "")
