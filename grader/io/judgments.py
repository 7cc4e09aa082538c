"""Judgments files: JSONL, one `Judgment` per line, read strictly and written atomically. A line
that would let a failure pass as a grade is refused with file, line and pydantic's reason."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol

import pandas as pd
from pydantic import ValidationError

from grader.errors import InputError
from grader.io.files import content_lines, empty_file_error, parse_json_object
from grader.models import Judgment

_EXAMPLE = "one Judgment JSON object per line (as written by `relgrade grade --out`)"


class Graded(Protocol):
    """Anything with ids and a grade (None when there is none): a `Judgment`, a person's grade."""

    @property
    def query_id(self) -> str: ...
    @property
    def doc_id(self) -> str: ...
    @property
    def grade(self) -> int | None: ...


def qrels_frame(graded: Iterable[Graded]) -> pd.DataFrame:
    """`[query_id, doc_id, grade]` of the items with a grade: a failure is unjudged, never 0."""
    rows = [(g.query_id, g.doc_id, g.grade) for g in graded if g.grade is not None]
    frame = pd.DataFrame(rows, columns=["query_id", "doc_id", "grade"])
    return frame.astype({"query_id": str, "doc_id": str, "grade": "int64"})


def iter_judgments(
    path: str | Path, *, clamp: bool = False
) -> Iterator[tuple[int, Judgment, bool]]:
    """(line number, Judgment, whether `clamp` moved its grade into 0..3) of each non-blank line."""
    for n, line in content_lines(path):
        record = parse_json_object(path, n, line)
        grade = record.get("grade")
        if clamp and isinstance(grade, int) and not isinstance(grade, bool):
            record["grade"] = min(3, max(0, grade))
        try:
            judgment = Judgment.model_validate(record)
        except ValidationError as exc:  # pydantic's errors in one line, at most three
            errors = exc.errors()
            parts = [f"{'.'.join(map(str, e['loc'])) or '(line)'}: {e['msg']}" for e in errors[:3]]
            more = [f"and {len(errors) - 3} more"] if len(errors) > 3 else []
            reason = "; ".join(parts + more)
            raise InputError(f"not a valid judgment: {reason}", path=path, line=n) from None
        yield n, judgment, record.get("grade") != grade


def read_judgments(path: str | Path, *, clamp: bool = False) -> list[Judgment]:
    """Every judgment of a JSONL file, in file order; an empty file is an error."""
    judgments = [j for _, j, _ in iter_judgments(path, clamp=clamp)]
    if not judgments:
        raise empty_file_error(path, "judgments", _EXAMPLE)
    return judgments
