"""One grade parser: human grade CSVs, the blind sample import and Label Studio exports accept and
refuse the same cells, each with the message its users know."""

from __future__ import annotations

from pathlib import Path

import pytest

from calibration.spotcheck.blind import parse_grade as parse_typed_grade
from grader.errors import InputError
from grader.io.grades import parse_grade, read_human_grades
from grader.models import GRADES, MAX_GRADE, MIN_GRADE

CELLS = ["0", "3", " 2 ", "2.0", "1e0", "-0", "2.5", "nan", "inf", "-inf", "1e999", "two", "",
         "4", "-1", "99999999999999999999", "0x2"]  # fmt: skip


def _typed(text: str) -> int | None:
    try:
        return parse_typed_grade(text, path="filled.csv", line=2)
    except InputError as err:
        assert str(err).startswith("filled.csv:2: grade ")
        assert str(err).endswith("is not one of 0, 1, 2, 3")
        return None


def _cell(text: str) -> int | None:
    try:
        return parse_grade(text, path="h.csv", lineno=2)[0]
    except InputError as err:
        assert str(err).startswith("h.csv:2: grade ")
        return None


@pytest.mark.parametrize("text", CELLS)
def test_both_imports_take_the_same_cells(text: str) -> None:
    assert _typed(text) == _cell(text)


def test_what_is_accepted_and_how_each_refusal_reads() -> None:
    assert [_cell(t) for t in ["0", "3", " 2 ", "2.0", "1e0", "-0"]] == [0, 3, 2, 2, 1, 0]
    with pytest.raises(InputError, match=r"grade '2\.5' is not an integer") as info:
        parse_grade("2.5", path="h.csv", lineno=7)
    assert info.value.line == 7
    with pytest.raises(InputError, match=r"grade 4 is outside 0\.\.3.*clamp=True"):
        parse_grade("4", path="h.csv", lineno=2)
    assert parse_grade("4", clamp=True, path="h.csv", lineno=2) == (3, True)
    assert parse_grade("-7", clamp=True, path="h.csv", lineno=2) == (0, True)


def test_clamp_never_turns_a_non_number_into_a_grade() -> None:
    for text in ["nan", "inf", "-inf", "1e999", "two", ""]:
        with pytest.raises(InputError, match="is not an integer"):
            parse_grade(text, clamp=True, path="h.csv", lineno=2)


def test_the_scale_is_the_models(tmp_path: Path) -> None:
    assert (MIN_GRADE, MAX_GRADE) == (GRADES[0], GRADES[-1]) == (0, 3)
    path = tmp_path / "h.csv"
    path.write_text("query_id,doc_id,grade\nq,a,3\nq,b,0\n")
    assert read_human_grades(path)["grade"].tolist() == [3, 0]
