"""Label Studio round trip: export a blind sample as tasks, import an annotation export as grades.

Tasks are `[{"data": {"query_id", "doc_id", "query", "document", ["title", "path"]}}, ...]` in
the sample's shuffled order, with no LLM grade. Use this labeling config (also written beside the
tasks file as `<stem>.config.xml`, with the scale's meanings as choice hints):

    <View>
      <Header value="$query"/>
      <Text name="document" value="$document"/>
      <Choices name="grade" toName="document" choice="single" required="true">
        <Choice value="0"/><Choice value="1"/><Choice value="2"/><Choice value="3"/>
      </Choices>
      <TextArea name="notes" toName="document" required="false"/>
    </View>

Import reads Label Studio's JSON export (tasks with `annotations[].result[]` holding
`{"from_name": "grade", "value": {"choices": ["2"]}}`) or its JSON-MIN export (flat records with
`grade`). Cancelled annotations are skipped; when a task has several, `annotator` picks one
person's (matched against `completed_by` id or email), otherwise the last one counts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

from calibration.spotcheck.blind import BlindItem, HumanGrade, parse_grade
from calibration.spotcheck.manifest import Manifest
from grader.errors import InputError
from grader.io.files import atomic_write, read_text

GRADE_FIELD = "grade"


def labeling_config(scale: Sequence[tuple[int, str]] | None = None) -> str:
    """The labeling config XML; `scale` ((grade, meaning), ...) becomes the choices' hints."""
    meanings = dict(scale or [])
    choices = "".join(
        f"    <Choice value={quoteattr(str(g))}"
        + (f" hint={quoteattr(meanings[g])}" if meanings.get(g) else "")
        + "/>\n"
        for g in range(4)
    )
    return (
        "<View>\n"
        '  <Header value="$query"/>\n'
        '  <Text name="document" value="$document"/>\n'
        f'  <Choices name="{GRADE_FIELD}" toName="document" choice="single" required="true">\n'
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
    for item in items:
        data: dict[str, str] = {
            "query_id": item.query_id,
            "doc_id": item.doc_id,
            "query": item.query,
            "document": item.document,
        }
        if item.title:
            data["title"] = item.title
        if item.path:
            data["path"] = item.path
        tasks.append({"data": data})
    with atomic_write(path) as fh:
        json.dump(tasks, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    p = Path(path)
    config = p.with_name(p.name.split(".", 1)[0] + ".config.xml")
    with atomic_write(config) as fh:
        fh.write(labeling_config(scale))
    return config


def _person(completed_by: Any) -> set[str]:
    if isinstance(completed_by, dict):
        return {str(v) for k, v in completed_by.items() if k in ("id", "email") and v is not None}
    return set() if completed_by is None else {str(completed_by)}


def _choice(result: list[Any]) -> str | None:
    for r in result:
        if isinstance(r, dict) and r.get("from_name") == GRADE_FIELD:
            choices = (r.get("value") or {}).get("choices") or []
            if choices:
                return str(choices[0])
    return None


def read_labelstudio_export(
    path: str | Path,
    manifest: Manifest | None,
    *,
    annotator: str | None = None,
    allow_missing: bool = False,
) -> list[HumanGrade]:
    """Human grades from a Label Studio JSON or JSON-MIN export, checked against the sample."""
    try:
        records = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc.msg}", path=path, line=exc.lineno) from None
    if not isinstance(records, list):
        raise InputError("expected a JSON list of tasks (Label Studio's JSON export)", path=path)
    known = manifest.probabilities() if manifest is not None else None
    out: list[HumanGrade] = []
    seen: set[tuple[str, str]] = set()
    missing: list[str] = []
    for n, rec in enumerate(records, start=1):
        where = f"task {n}"
        if not isinstance(rec, dict):
            raise InputError(f"{where} is not an object", path=path)
        inner = rec.get("data")
        data: dict[str, Any] = inner if isinstance(inner, dict) else rec
        qid, did = data.get("query_id"), data.get("doc_id")
        if qid is None or did is None:
            raise InputError(f"{where} has no query_id/doc_id in its data", path=path)
        key = (str(qid), str(did))
        if known is not None and key not in known:
            raise InputError(f"{where}: pair ({key[0]}, {key[1]}) is not in the sample", path=path)
        if key in seen:
            raise InputError(f"{where}: pair ({key[0]}, {key[1]}) appears twice", path=path)
        seen.add(key)
        value: str | None = None
        who: str | None = None
        if "annotations" in rec:
            for ann in rec.get("annotations") or []:
                if ann.get("was_cancelled"):
                    continue
                people = _person(ann.get("completed_by"))
                if annotator is not None and annotator not in people:
                    continue
                choice = _choice(ann.get("result") or [])
                if choice is not None:
                    value, who = choice, annotator or (min(people) if people else None)
        else:
            raw = rec.get(GRADE_FIELD)
            if isinstance(raw, dict):
                raw = (raw.get("choices") or [None])[0]
            value = None if raw is None or raw == "" else str(raw)
            who = None if rec.get("annotator") is None else str(rec.get("annotator"))
        if value is None:
            missing.append(f"{key[0]}/{key[1]}")
            continue
        grade = parse_grade(value, path=f"{path} ({where})", line=None)
        out.append(HumanGrade(key[0], key[1], grade, who))
    if missing and not allow_missing:
        raise InputError(
            f"{len(missing)} task(s) have no grade, e.g. {', '.join(missing[:5])}",
            path=path,
            hint="finish them in Label Studio, or pass --allow-missing to import the graded ones",
        )
    return out
