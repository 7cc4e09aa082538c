"""Telling a grades CSV from TREC qrels by a file's first line (no pandas: `relgrade evaluate`
decides this before it knows whether it needs a DataFrame at all)."""

from __future__ import annotations

HEADER_ALIASES = {"qid": "query_id", "docid": "doc_id"}
REQUIRED = ("query_id", "doc_id", "grade")
# An LLM grades frame's P(grade = 0..3), when the judge gave logprobs (NaN for a pair without)
DISTRIBUTION_COLUMNS = ("p_grade_0", "p_grade_1", "p_grade_2", "p_grade_3")


LARGEST_GRADE = 2.0**53
"""The largest grade read as written: beyond 2**53 a float64 no longer holds every integer."""
LARGE_HINT = "qrels grades are small integers such as -2..4"


def clamp_hint() -> str:
    """The fix for a grade outside 0..3, naming `--clamp` or `clamp=True` as the caller uses it."""
    from grader.spelling import option

    flag = option("--clamp", "clamp=True")
    return f"fix the grade, or pass {flag} to move it to the nearest of 0 and 3"


def looks_like_qrels(line: str) -> bool:
    """Whether a first line reads as TREC qrels rather than CSV: four whitespace-separated cells and
    no comma (the qrels reader then names a bad grade), unless it is a TSV header."""
    cells = line.split()
    if len(cells) != 4 or "," in line:
        return False
    names = {HEADER_ALIASES.get(c.lower(), c.lower()) for c in cells}
    return not set(REQUIRED) <= names


def looks_like_run(line: str) -> bool:
    """Whether a line reads as a TREC run line (`qid Q0 docid rank score tag`): six or more
    whitespace-separated cells, no comma, a number in the rank and score columns."""
    cells = line.split()
    if len(cells) < 6 or "," in line:
        return False
    try:
        float(cells[3]), float(cells[4])
    except ValueError:
        return False
    return True
