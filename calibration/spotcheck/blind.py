"""Blind sample files for people: the CSV they grade (texts as the LLM saw them, nothing that
reveals its grade, rows in the sample's random order), reading it back against the manifest,
and the grade scale people see (meanings from a prompt file's `[scale]`, else neutral 0..3)."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from calibration.spotcheck.manifest import Manifest
from grader.errors import InputError, NotAJudgePrompt, RelgradeError
from grader.io.files import atomic_write, read_text
from grader.io.grades import parse_grade as parse_grade_cell
from grader.io.judgments import qrels_frame
from grader.io.streams import allow_long_csv_fields
from grader.io.trec import write_qrels
from grader.models import GRADES, Doc, Query
from grader.prompts import PromptSpec, load_prompt, truncate

OPTIONAL_DOC_COLUMNS = ("title", "path")


@dataclass(frozen=True)
class BlindItem:
    """One row of a blind sample: ids and the texts a person needs to grade."""

    query_id: str
    doc_id: str
    query: str
    document: str
    title: str | None = None
    path: str | None = None
    truncated: bool = False  # the document is cut to the prompt's budget, as the LLM saw it


Budgets = Mapping[tuple[str, str], PromptSpec]
"""The prompt each pair was graded with (pairs absent: the whole text was graded)."""


def blind_items(
    pairs: Sequence[tuple[str, str]],
    queries: Mapping[str, Query],
    docs: Mapping[str, Doc],
    *,
    allow_missing_text: bool = False,
    budgets: Budgets | None = None,
) -> list[BlindItem]:
    """The items of a sample, in the order given, documents cut to their prompt's budget (`budgets`)
    as the LLM saw them; a pair without text is an error unless `allow_missing_text`."""
    if allow_missing_text:
        return [BlindItem(query_id=q, doc_id=d, query="", document="") for q, d in pairs]
    out: list[BlindItem] = []
    missing_q = sorted({q for q, _ in pairs if q not in queries})
    missing_d = sorted({d for _, d in pairs if d not in docs})
    if missing_q or missing_d:
        parts = []
        if missing_q:
            parts.append(f"{len(missing_q)} query id(s) such as {missing_q[0]!r}")
        if missing_d:
            parts.append(f"{len(missing_d)} doc id(s) such as {missing_d[0]!r}")
        raise InputError(
            "no text for " + " and ".join(parts),
            hint="pass the queries and docs files (or the store) the judgments were graded from",
        )
    for qid, did in pairs:
        doc = docs[did]
        path = doc.metadata.get("path")
        spec = budgets.get((qid, did)) if budgets else None
        text, cut = doc.text, False
        if spec is not None:  # as the prompt gave it to the LLM
            text, cut = truncate(
                doc.text.strip("\n"), spec.doc_budget_chars, spec.truncation_marker
            )
        out.append(
            BlindItem(
                query_id=qid,
                doc_id=did,
                query=queries[qid].text,
                document=text,
                title=doc.title,
                path=None if path is None else str(path),
                truncated=cut,
            )
        )
    return out


def write_blind_csv(path: str | Path, items: Sequence[BlindItem]) -> None:
    """Write the blind CSV (atomically): ids, query, [title, path,] document, empty grade, notes."""
    extra = [c for c in OPTIONAL_DOC_COLUMNS if any(getattr(i, c) for i in items)]
    cut = ["truncated"] if any(i.truncated for i in items) else []
    columns = ["query_id", "doc_id", "query", *extra, "document", *cut, "grade", "notes"]
    with atomic_write(path) as fh:
        writer = csv.DictWriter(fh, columns, lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        for item in items:  # grade and notes stay empty
            cells = {"title": item.title or "", "path": item.path or ""}
            writer.writerow({**asdict(item), **cells, "truncated": "yes" if item.truncated else ""})


def read_blind_csv(path: str | Path) -> list[BlindItem]:
    """The items of a blind CSV."""
    return [
        BlindItem(
            query_id=key[0],
            doc_id=key[1],
            query=get("query"),
            document=get("document"),
            title=get("title") or None,
            path=get("path") or None,
            truncated=get("truncated").strip().lower() in ("yes", "true", "1"),
        )
        for _, key, get in _pair_rows(path, ("query_id", "doc_id", "query", "document"))
    ]


@dataclass(frozen=True)
class HumanGrade:
    """One grade a person gave, with where it came from (for error messages)."""

    query_id: str
    doc_id: str
    grade: int
    annotator: str | None = None


def parse_grade(text: str, *, path: str | Path, line: int | None) -> int:
    """A grade typed by a person: an integer 0..3 ("2" or "2.0"), parsed by
    `grader.io.grades.parse_grade`; these imports take no --clamp."""
    try:
        grade, _ = parse_grade_cell(text, path=path, lineno=line)
    except InputError:
        allowed = ", ".join(str(g) for g in GRADES)
        raise InputError(
            f"grade {text.strip()!r} is not one of {allowed}", path=path, line=line
        ) from None
    return grade


def read_filled_csv(
    path: str | Path,
    manifest: Manifest | None,
    *,
    allow_missing: bool = False,
    delimiter: str = ",",
) -> list[HumanGrade]:
    """Grades from a filled blind CSV (or any query_id,doc_id,grade CSV or TSV); unknown pairs,
    missing grades (unless `allow_missing`) and grades outside 0..3 are errors."""
    known = manifest.probabilities() if manifest is not None else None
    out: list[HumanGrade] = []
    missing: list[int] = []
    for line, key, get in _pair_rows(path, ("query_id", "doc_id", "grade"), delimiter):
        if known is not None and key not in known:
            raise InputError(
                f"pair ({key[0]}, {key[1]}) is not in the sample",
                path=path,
                line=line,
                hint="grade only the rows of the sample; do not add or edit ids",
            )
        if not get("grade").strip():
            missing.append(line)
            continue
        grade = parse_grade(get("grade"), path=path, line=line)
        out.append(HumanGrade(key[0], key[1], grade, get("annotator") or None))
    if missing and not allow_missing:
        shown = ", ".join(str(n) for n in missing[:10])
        raise InputError(
            f"{len(missing)} row(s) have no grade (lines {shown}"
            + (" ...)" if len(missing) > 10 else ")"),
            path=path,
            line=missing[0],
            hint="fill them in, or pass --allow-missing to import only the graded rows",
        )
    return out


def write_human_grades(path: str | Path, grades: Sequence[HumanGrade]) -> None:
    """Write human grades as TREC qrels when the name ends in .qrels or .txt (so they can stand in
    calibrate's `--llm` slot), else as `query_id,doc_id,grade[,annotator]` CSV (atomically)."""
    if Path(path).name.removesuffix(".gz").endswith((".qrels", ".txt")):
        write_qrels(path, qrels_frame(grades))
        return
    columns = ["query_id", "doc_id", "grade"] + (
        ["annotator"] if any(g.annotator for g in grades) else []
    )
    with atomic_write(path) as fh:
        writer = csv.DictWriter(fh, columns, lineterminator="\n", extrasaction="ignore")
        writer.writeheader()
        writer.writerows({**asdict(g), "annotator": g.annotator or ""} for g in grades)


def _pair_rows(
    path: str | Path, needed: Sequence[str], delimiter: str = ","
) -> Iterator[tuple[int, tuple[str, str], Callable[[str], str]]]:
    """(line, (query_id, doc_id), cell getter) of each record; a pair listed twice is an error."""
    rows = _csv_rows(path, delimiter)
    col = _columns(path, rows[0][1], needed)
    seen: dict[tuple[str, str], int] = {}
    for line, row in rows[1:]:
        get = _getter(row, col)
        key = (get("query_id"), get("doc_id"))
        if key in seen:
            raise InputError(
                f"pair ({key[0]}, {key[1]}) is listed twice (first on line {seen[key]})",
                path=path,
                line=line,
            )
        seen[key] = line
        yield line, key, get


def _csv_rows(path: str | Path, delimiter: str = ",") -> list[tuple[int, list[str]]]:
    """(starting line, cells) of each non-blank CSV (or TSV) record; the first is the header."""
    allow_long_csv_fields()
    reader = csv.reader(io.StringIO(read_text(path), newline=""), delimiter=delimiter)
    rows: list[tuple[int, list[str]]] = []
    start = 1
    try:
        for cells in reader:
            if any(c.strip() for c in cells):
                rows.append((start, cells))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise InputError(f"not valid CSV: {exc}", path=path, line=start) from None
    if not rows:
        raise InputError("empty file", path=path, hint="expected a header query_id,doc_id,...")
    return rows


def _columns(path: str | Path, header: list[str], needed: Sequence[str]) -> dict[str, int]:
    col = {name.strip(): i for i, name in enumerate(header)}
    lacking = [n for n in needed if n not in col]
    if lacking:
        raise InputError(
            f"missing column(s) {', '.join(lacking)}",
            path=path,
            line=1,
            hint="the first line must name the columns, e.g. " + ",".join(needed),
        )
    return col


def _getter(row: list[str], col: dict[str, int]) -> Callable[[str], str]:
    def get(name: str) -> str:
        i = col.get(name)
        return row[i] if i is not None and i < len(row) else ""

    return get


Scale = list[tuple[int, str]]


def neutral_scale() -> Scale:
    """Grades 0..3 with no meaning attached."""
    return [(g, "") for g in GRADES]


def prompt_scale(name: str) -> Scale:
    """The scale of prompt `name` (`passage`, `passage@1`, or a path to a prompt file); a
    RelgradeError when it lacks a 0..3 meaning."""
    try:
        spec = load_prompt(name)
    except NotAJudgePrompt:
        raise RelgradeError(
            f"{name} is the offline lexical judge's settings, not an LLM prompt: its grades have "
            "no written meanings"
        ) from None
    if set(spec.scale) != set(GRADES):
        raise RelgradeError(f"prompt {name!r} has no [scale] with meanings for 0..3")
    return [(g, spec.scale[g]) for g in GRADES]
