"""Judgments JSONL: strict per-line validation and atomic writing."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grader.errors import InputError
from grader.io.grades import read_llm_grades
from grader.io.judgments import read_judgments
from grader.models import Judgment, JudgmentError, PromptRef, Usage
from tests.helpers.judgments import write_judgments


def ok(qid: str, did: str, grade: int, **extra: Any) -> Judgment:
    return Judgment(
        query_id=qid,
        doc_id=did,
        grade=grade,
        status="ok",
        judge="lexical",
        key=f"sha256:{qid}-{did}",
        **extra,
    )


def failed(qid: str, did: str) -> Judgment:
    return Judgment(
        query_id=qid,
        doc_id=did,
        status="failed",
        judge="openai:m",
        key=f"sha256:{qid}-{did}",
        error=JudgmentError(type="InvalidReply", message="grade 7", raw_reply='{"grade": 7}'),
    )


@pytest.mark.parametrize("name", ["j.jsonl", "j.jsonl.gz"])
def test_round_trip_keeps_every_field(tmp_path: Path, name: str) -> None:
    judgments = [
        ok(
            "1",
            "a",
            3,
            distribution=[0.0, 0.1, 0.2, 0.7],
            expected_grade=2.6,
            prompt=PromptRef(name="code", version="1", sha256="sha256:x"),
            usage=Usage(prompt_tokens=10, completion_tokens=3, cached_tokens=2),
            cost=0.001,
        ),
        failed("1", "b"),
    ]
    path = tmp_path / name
    assert write_judgments(path, judgments) == 2
    if name.endswith(".gz"):
        with gzip.open(path) as fh:
            assert fh.read(1) == b"{"
    assert read_judgments(path) == judgments
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_failed_write_leaves_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    write_judgments(path, [ok("1", "a", 2)])

    def broken() -> Iterator[Judgment]:
        yield ok("2", "b", 1)
        raise RuntimeError("crash mid-way")

    with pytest.raises(RuntimeError):
        write_judgments(path, broken())
    assert [j.query_id for j in read_judgments(path)] == ["1"]


def test_ok_without_grade_is_refused_with_line_and_reason(tmp_path: Path) -> None:
    good = ok("1", "a", 2).model_dump_json()
    bad = json.loads(good) | {"grade": None}
    path = tmp_path / "j.jsonl"
    path.write_text(good + "\n\n" + json.dumps(bad) + "\n")
    with pytest.raises(InputError) as err:
        read_judgments(path)
    message = str(err.value)
    assert "j.jsonl:3" in message
    assert "an ok judgment must carry a grade" in message


def test_out_of_range_grade_refused_unless_clamped(tmp_path: Path) -> None:
    record = json.loads(ok("1", "a", 2).model_dump_json()) | {"grade": 5}
    path = tmp_path / "j.jsonl"
    path.write_text(json.dumps(record) + "\n")
    with pytest.raises(InputError, match=r"j\.jsonl:1: not a valid judgment: grade: .*less than"):
        read_judgments(path)
    assert read_judgments(path, clamp=True)[0].grade == 3


def test_clamped_grades_are_counted(tmp_path: Path) -> None:
    lines = [
        json.loads(ok("1", "a", 2).model_dump_json()) | {"grade": 5},
        json.loads(ok("1", "b", 2).model_dump_json()),
        json.loads(ok("1", "c", 2).model_dump_json()) | {"grade": -1},
    ]
    path = tmp_path / "j.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    frame = read_llm_grades(path, clamp=True)
    assert frame["grade"].tolist() == [3, 2, 0] and frame.attrs["clamped"] == 2
    path.write_text(json.dumps(lines[1]) + "\n")
    assert read_llm_grades(path, clamp=True).attrs["clamped"] == 0


def test_missing_field_bad_json_empty_and_non_utf8(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_text('{"query_id": "1", "doc_id": "a", "status": "ok", "grade": 1}\n')
    with pytest.raises(InputError, match=r"j\.jsonl:1: not a valid judgment: judge: Field req"):
        read_judgments(path)
    path.write_text(ok("1", "a", 1).model_dump_json() + "\n{oops\n")
    with pytest.raises(InputError, match=r"j\.jsonl:2: not valid JSON"):
        read_judgments(path)
    path.write_text("\n")
    with pytest.raises(InputError, match=r"j\.jsonl: no judgments in the file"):
        read_judgments(path)
    path.write_bytes(b'{"query_id": "\xff"}\n')
    with pytest.raises(InputError, match=r"j\.jsonl:1: not valid UTF-8"):
        read_judgments(path)
