"""Label Studio: tasks and their labeling config from a blind sample, and annotation exports
(JSON, JSON-MIN, CSV, TSV, as Label Studio 1.x writes them) read back as human grades: a
person's latest annotation counts, and a pair two people graded needs `annotator`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

from calibration.spotcheck.blind import (
    BlindItem,
    HumanGrade,
    _columns,
    _csv_rows,
    _getter,
    parse_grade,
)
from calibration.spotcheck.manifest import Manifest
from grader.errors import InputError
from grader.io.files import atomic_write, read_text

GRADE_FIELD = "grade"
TABLE_MARKERS = ("annotation_id", "annotator")
"""Columns Label Studio's CSV and TSV exports always hold; a blind CSV has neither."""


@dataclass(frozen=True)
class _Annotation:
    """One annotation (or one task without any) as an export shows it."""

    where: str
    line: int | None
    key: tuple[str, str]
    value: str | None
    person: str | None
    email: str | None
    when: str
    cancelled: bool = False


@dataclass(frozen=True)
class LabelStudioImport:
    """The grades an export holds for a sample, and how the sample's pairs came back."""

    grades: list[HumanGrade]
    format: str
    sample: int
    skipped: int
    missing: int
    regraded: int
    annotators: dict[str, int]

    @property
    def skips_visible(self) -> bool:
        """Whether the format shows skipped tasks (only JSON does)."""
        return self.format == "JSON"

    def counts(self) -> str:
        """`graded 40, skipped 2, missing 8 of the 50 sampled pairs` (skips merged when unseen)."""
        parts = [f"graded {len(self.grades)}"]
        if self.skips_visible:
            parts += [f"skipped {self.skipped}", f"missing {self.missing}"]
        else:
            parts.append(f"missing or skipped {self.missing}")
        return ", ".join(parts) + f" of the {self.sample} sampled pairs"


def is_labelstudio_table(path: str | Path) -> bool:
    """Whether a CSV or TSV file is a Label Studio export (it has annotation_id and annotator)."""
    header = _first_line(path)
    cells = {c.strip().strip('"') for c in header.split(table_delimiter(header))}
    return all(m in cells for m in TABLE_MARKERS)


def table_delimiter(header: str) -> str:
    """Tab when the header line has more tabs than commas (TSV), else comma."""
    return "\t" if header.count("\t") > header.count(",") else ","


def _first_line(path: str | Path) -> str:
    text = read_text(path)
    return text.lstrip("\ufeff").split("\n", 1)[0]


def read_labelstudio_export(
    path: str | Path,
    manifest: Manifest | None,
    *,
    annotator: str | None = None,
    allow_missing: bool = False,
) -> LabelStudioImport:
    """Human grades from a Label Studio JSON, JSON-MIN, CSV or TSV export, checked against the
    sample (`manifest`; None: the pairs the export holds are the sample)."""
    name = Path(path).name.removesuffix(".gz").lower()
    if name.endswith(".json"):
        fmt, annotations = _read_json(path)
    else:
        delimiter = table_delimiter(_first_line(path))
        fmt = "TSV" if delimiter == "\t" else "CSV"
        annotations = _read_table(path, delimiter)
    return _resolve(path, fmt, annotations, manifest, annotator, allow_missing)


def _person(completed_by: Any) -> tuple[str | None, str | None]:
    """(id or name, email) of a `completed_by` / `annotator` value."""
    if isinstance(completed_by, dict):
        pid, email = completed_by.get("id"), completed_by.get("email")
        return (None if pid is None else str(pid)), (None if not email else str(email))
    if completed_by is None or str(completed_by).strip() in ("", "None"):
        return None, None
    text = str(completed_by).strip()
    return (None, text) if "@" in text else (text, None)


def _when(record: dict[str, Any]) -> str:
    return str(record.get("updated_at") or record.get("created_at") or "")


def _choice(result: Any, where: str, path: str | Path) -> str | None:
    """The grade chosen in an annotation's result list (None when it holds none)."""
    for r in result if isinstance(result, list) else []:
        if isinstance(r, dict) and r.get("from_name") == GRADE_FIELD:
            choices = (r.get("value") or {}).get("choices") or []
            if len(choices) > 1:
                raise InputError(f"{where}: several grades chosen ({choices})", path=path)
            if choices:
                return str(choices[0])
    return None


def _min_grade(raw: Any, where: str, path: str | Path) -> str | None:
    if isinstance(raw, dict):
        raw = raw.get("choices") or None
    if isinstance(raw, list) and len(raw) == 1:
        raw = raw[0]
    if isinstance(raw, list):
        raise InputError(f"{where}: several grades chosen ({raw})", path=path)
    return None if raw is None or raw == "" else str(raw)


def _read_json(path: str | Path) -> tuple[str, list[_Annotation]]:
    try:
        records = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", path=path, line=exc.lineno) from None
    if not isinstance(records, list):
        raise InputError("expected a JSON list of tasks (Label Studio's JSON export)", path=path)
    out: list[_Annotation] = []
    full = False
    for n, rec in enumerate(records, start=1):
        where = f"task {n}"
        if not isinstance(rec, dict):
            raise InputError(f"{where} is not an object", path=path)
        inner = rec.get("data")
        data: dict[str, Any] = inner if isinstance(inner, dict) else rec
        qid, did = data.get("query_id"), data.get("doc_id")
        if qid is None or did is None:
            raise InputError(
                f"{where} has no query_id/doc_id in its data",
                path=path,
                hint="import tasks written by `relgrade sample --labelstudio`",
            )
        key = (str(qid), str(did))
        if "annotations" in rec or "completions" in rec:
            full = True
            anns = rec.get("annotations", rec.get("completions")) or []
            if not anns:
                out.append(_Annotation(where, None, key, None, None, None, ""))
            for ann in anns:
                if not isinstance(ann, dict):
                    raise InputError(f"{where}: an annotation is not an object", path=path)
                pid, email = _person(ann.get("completed_by"))
                cancelled = bool(ann.get("was_cancelled") or ann.get("skipped"))
                value = None if cancelled else _choice(ann.get("result"), where, path)
                out.append(_Annotation(where, None, key, value, pid, email, _when(ann), cancelled))
        else:
            value = _min_grade(rec.get(GRADE_FIELD), where, path)
            pid, email = _person(rec.get("annotator"))
            out.append(_Annotation(where, None, key, value, pid, email, _when(rec)))
    return ("JSON" if full else "JSON-MIN"), out


def _read_table(path: str | Path, delimiter: str) -> list[_Annotation]:
    rows = _csv_rows(path, delimiter)
    header, body = rows[0][1], rows[1:]
    col = _columns(path, [c.strip().strip('"') for c in header], ("query_id", "doc_id"))
    out: list[_Annotation] = []
    for line, row in body:
        get = _getter(row, col)
        key = (get("query_id").strip(), get("doc_id").strip())
        value = get(GRADE_FIELD).strip() or None
        pid, email = _person(get("annotator"))
        when = get("updated_at").strip() or get("created_at").strip()
        out.append(_Annotation(f"line {line}", line, key, value, pid, email, when))
    return out


class _Annotators:
    """Who graded what in an export, and which annotations `annotator` (an id or an email,
    None: everyone's) asks for; a person's id and email are tied where the export shows both."""

    def __init__(self, annotations: list[_Annotation], annotator: str | None) -> None:
        self.emails = {a.person: a.email for a in annotations if a.person and a.email}
        graded_by: dict[str, set[tuple[str, str]]] = {}
        for a in annotations:
            if a.value is not None:
                graded_by.setdefault(self.label(a), set()).add(a.key)
        self.people = {who: len(keys) for who, keys in sorted(graded_by.items())}
        """Pairs graded, by person."""
        self.listing = ", ".join(f"{who} ({n} pairs)" for who, n in self.people.items()) or "none"
        self.wanted = None if annotator is None else annotator.strip().casefold()

    def label(self, a: _Annotation) -> str:
        """The name a grade is recorded under: the email when known, else the id."""
        return a.email or self.emails.get(a.person or "") or a.person or "unknown"

    def match(self, a: _Annotation) -> bool:
        """Whether `a` counts: by the annotator asked for, or anyone's when none was."""
        if self.wanted is None:
            return True
        found = {a.person, a.email, self.emails.get(a.person or "")}
        return self.wanted in {n.casefold() for n in found if n}


def _by_pair(
    path: str | Path,
    annotations: list[_Annotation],
    known: dict[tuple[str, str], float] | None,
) -> dict[tuple[str, str], list[_Annotation]]:
    """The annotations of each pair; every pair must be in the sample (`known`, when given)."""
    by_key: dict[tuple[str, str], list[_Annotation]] = {}
    for a in annotations:
        if known is not None and a.key not in known:
            raise InputError(
                f"{a.where}: pair ({a.key[0]}, {a.key[1]}) is not in the sample",
                path=path,
                line=a.line,
                hint="import the export of the project made from this sample's tasks",
            )
        by_key.setdefault(a.key, []).append(a)
    return by_key


def _one_grade_each(
    path: str | Path, by_key: dict[tuple[str, str], list[_Annotation]], people: _Annotators
) -> tuple[list[HumanGrade], int, int]:
    """The grade of each pair (its latest annotation that counts), the pairs skipped and the
    pairs graded more than once; InputError when more than one person graded a pair."""
    grades: list[HumanGrade] = []
    skipped = regraded = 0
    shared: dict[tuple[str, str], set[str]] = {}
    for key, group in by_key.items():
        mine = [a for a in group if people.match(a)]
        done = [a for a in mine if a.value is not None]
        if not done:
            skipped += any(a.cancelled for a in mine)
            continue
        who = {people.label(a) for a in done}
        if len(who) > 1:
            shared[key] = who
            continue
        regraded += len(done) > 1
        latest = max(reversed(done), key=lambda a: a.when)  # the last of equal times
        where = f"{path} ({latest.where})" if latest.line is None else path
        grade = parse_grade(latest.value or "", path=where, line=latest.line)
        grades.append(HumanGrade(key[0], key[1], grade, people.label(latest)))
    if shared:
        (q, d), who = next(iter(shared.items()))
        raise InputError(
            f"{len(shared)} pair(s) were graded by more than one person, e.g. ({q}, {d}) by "
            f"{', '.join(sorted(who))}; annotators: {people.listing}",
            path=path,
            hint="pass --annotator ID|EMAIL to import one person's grades; import each person "
            "to a file of their own to compare them with calibrate --second-human",
        )
    return grades, skipped, regraded


def _resolve(
    path: str | Path,
    fmt: str,
    annotations: list[_Annotation],
    manifest: Manifest | None,
    annotator: str | None,
    allow_missing: bool,
) -> LabelStudioImport:
    known = manifest.probabilities() if manifest is not None else None
    by_key = _by_pair(path, annotations, known)
    people = _Annotators(annotations, annotator)
    if annotator is not None and not any(people.match(a) for a in annotations):
        raise InputError(
            f"no annotation by {annotator!r} in this export; its annotators: {people.listing}",
            path=path,
            hint="pass --annotator with one of them: Label Studio names a person by user id "
            "(a number) or by email, depending on its version and the export format",
        )
    grades, skipped, regraded = _one_grade_each(path, by_key, people)
    sample = len(known) if known is not None else len(by_key)
    result = LabelStudioImport(
        grades=grades,
        format=fmt,
        sample=sample,
        skipped=skipped,
        missing=sample - len(grades) - skipped,
        regraded=regraded,
        annotators=people.people,
    )
    if (result.missing or result.skipped) and not allow_missing:
        raise InputError(
            f"{result.missing + result.skipped} sampled pair(s) have no grade"
            + ("" if annotator is None else f" from annotator {annotator}")
            + f": {result.counts()}",
            path=path,
            hint="finish them in Label Studio, or pass --allow-missing to import the graded ones",
        )
    return result


def labeling_config(scale: Sequence[tuple[int, str]] | None = None) -> str:
    """The labeling config XML; `scale` ((grade, meaning), ...) gives hints and a legend. Each
    choice's hotkey is its grade (Label Studio's default 1..4 would record 1 for the key "2")."""
    meanings = {g: m for g, m in (scale or []) if m}
    choices = "".join(
        f"    <Choice value={quoteattr(str(g))} hotkey={quoteattr(str(g))}"
        + (f" hint={quoteattr(meanings[g])}" if g in meanings else "")
        + "/>\n"
        for g in range(4)
    )
    legend = "".join(
        f'    <Header size="6" value={quoteattr(f"{g}: {meanings[g]}")}/>\n'
        for g in range(4)
        if g in meanings
    )
    return (
        "<View>\n"
        "  <Style>.htx-text { white-space: pre-wrap; }</Style>\n"
        '  <Header value="$query"/>\n'
        '  <Text name="document" value="$document"/>\n'
        + (f"  <View>\n{legend}  </View>\n" if legend else "")
        + f'  <Choices name="{GRADE_FIELD}" toName="document" choice="single" required="true">\n'
        f"{choices}"
        "  </Choices>\n"
        '  <TextArea name="notes" toName="document" required="false"/>\n'
        "</View>\n"
    )


def write_labelstudio_tasks(
    path: str | Path, items: Sequence[BlindItem], scale: Sequence[tuple[int, str]] | None = None
) -> Path:
    """Write the tasks JSON and its labeling config beside it; returns the config's path."""
    tasks = []
    for item in items:  # title and path only when the document has them
        data = {k: getattr(item, k) for k in ("query_id", "doc_id", "query", "document")}
        data |= {k: v for k in ("title", "path") if (v := getattr(item, k))}
        tasks.append({"data": data})
    with atomic_write(path) as fh:
        json.dump(tasks, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    p = Path(path)
    config = p.with_name(p.name.split(".", 1)[0] + ".config.xml")
    with atomic_write(config) as fh:
        fh.write(labeling_config(scale))
    return config
