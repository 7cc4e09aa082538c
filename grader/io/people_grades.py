"""People's grades as written (any integer grade), and the map of LLM grades onto them
(`--llm-scale`): what `grade --skip-judged` and `evaluate --fill` both read."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from grader.errors import InputError
from grader.io.grade_format import looks_like_qrels
from grader.io.grades import read_human_grades
from grader.io.trec import read_qrels
from grader.models import GRADES

IDENTITY_SCALE = {g: g for g in GRADES}


def read_people_grades(path: str | Path) -> pd.DataFrame:
    """Human grades [query_id, doc_id, grade] as written: TREC qrels with any integer grade
    (as trec_eval reads them), or a grades CSV (0..3). A pair listed twice is an error naming
    the file and both lines."""
    first = ""
    from grader.io.files import iter_lines

    for _, line in iter_lines(path):
        if line.strip() and not line.lstrip().startswith("#"):
            first = line
            break
    if first and looks_like_qrels(first):
        frame = read_qrels(path, any_grade=True)
    else:
        frame = read_human_grades(path)[["query_id", "doc_id", "grade"]]
    if frame.empty:
        raise InputError("holds no grades", path=path, hint="give TREC qrels (qid 0 docid grade)")
    frame.attrs["path"] = str(path)
    return frame


def parse_llm_scale(text: str) -> dict[int, int]:
    """`0:0,1:1,2:2,3:3` as {llm grade: merged grade}; every LLM grade 0..3 exactly once."""
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
