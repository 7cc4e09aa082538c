"""Label Studio round trip: blind tasks out, annotation exports (JSON and JSON-MIN) back in.

The shapes of a real server's exports, through the command line: test_labelstudio_exports.py."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from calibration.spotcheck.blind import BlindItem
from calibration.spotcheck.labelstudio import read_labelstudio_export, write_labelstudio_tasks
from calibration.spotcheck.manifest import Manifest, ManifestPair
from grader.errors import InputError

ITEMS = [
    BlindItem("q1", "d1", "what is x", "x is <b>y</b>", title="X"),
    BlindItem("q1", "d2", "what is x", "nothing here"),
]
MANIFEST = Manifest(
    strategy="uniform",
    seed=1,
    population=10,
    pairs=[
        ManifestPair(query_id=i.query_id, doc_id=i.doc_id, inclusion_probability=0.2) for i in ITEMS
    ],
)


def test_tasks_hold_the_texts_and_no_grade_and_the_config_carries_the_scale(tmp_path: Path) -> None:
    tasks_path = tmp_path / "tasks.json"
    config = write_labelstudio_tasks(
        tasks_path, ITEMS, [(0, "Irrelevant"), (1, "Related"), (2, "High"), (3, "Perfect")]
    )
    tasks = json.loads(tasks_path.read_text())
    assert tasks[0] == {
        "data": {
            "query_id": "q1",
            "doc_id": "d1",
            "query": "what is x",
            "document": "x is <b>y</b>",
            "title": "X",
        }
    }
    assert "grade" not in json.dumps(tasks)
    root = ET.fromstring(config.read_text())
    choices = root.find("Choices")
    assert choices is not None and choices.get("name") == "grade"
    assert [(c.get("value"), c.get("hint")) for c in choices] == [
        ("0", "Irrelevant"),
        ("1", "Related"),
        ("2", "High"),
        ("3", "Perfect"),
    ]


def _annotation(choice: str, who: Any, *, cancelled: bool = False) -> dict[str, Any]:
    return {
        "completed_by": who,
        "was_cancelled": cancelled,
        "result": [
            {
                "from_name": "grade",
                "to_name": "document",
                "type": "choices",
                "value": {"choices": [choice]},
            }
        ],
    }


def _export(tmp_path: Path, records: list[dict[str, Any]]) -> Path:
    path = tmp_path / "export.json"
    path.write_text(json.dumps(records))
    return path


def test_full_json_export_with_two_people_and_a_cancelled_annotation(tmp_path: Path) -> None:
    path = _export(
        tmp_path,
        [
            {
                "id": 1,
                "data": {"query_id": "q1", "doc_id": "d1"},
                "annotations": [
                    _annotation("3", {"id": 7, "email": "ann@example.org"}),
                    _annotation("0", {"id": 8, "email": "bob@example.org"}),
                ],
            },
            {
                "id": 2,
                "data": {"query_id": "q1", "doc_id": "d2"},
                "annotations": [
                    _annotation("1", 7),
                    _annotation("2", 7, cancelled=True),
                ],
            },
        ],
    )
    # id 7 is ann@example.org (task 1 says so), so her email finds her grade of d2 too
    ann = read_labelstudio_export(path, MANIFEST, annotator="ann@example.org")
    assert [(g.doc_id, g.grade, g.annotator) for g in ann.grades] == [
        ("d1", 3, "ann@example.org"),
        ("d2", 1, "ann@example.org"),
    ]
    assert read_labelstudio_export(path, MANIFEST, annotator="7").grades == ann.grades
    bob = read_labelstudio_export(path, MANIFEST, annotator="8", allow_missing=True)
    assert [(g.doc_id, g.grade) for g in bob.grades] == [("d1", 0)]
    assert (bob.format, bob.sample, bob.skipped, bob.missing) == ("JSON", 2, 0, 1)
    with pytest.raises(InputError, match=r"\(q1, d1\) by ann@example.org, bob@example.org"):
        read_labelstudio_export(path, MANIFEST)


def test_json_min_export(tmp_path: Path) -> None:
    path = _export(
        tmp_path,
        [
            {"query_id": "q1", "doc_id": "d1", "grade": "2"},
            {"query_id": "q1", "doc_id": "d2", "grade": "0"},
        ],
    )
    result = read_labelstudio_export(path, MANIFEST)
    assert [g.grade for g in result.grades] == [2, 0] and result.format == "JSON-MIN"


@pytest.mark.parametrize(
    ("records", "message"),
    [
        (
            [{"query_id": "q1", "doc_id": "d9", "grade": "2"}],
            r"task 1: pair \(q1, d9\) is not in the sample",
        ),
        (
            [{"query_id": "q1", "doc_id": "d1", "grade": "5"}],
            r"export\.json \(task 1\): grade '5' is not one of",
        ),
        (
            [{"query_id": "q1", "doc_id": "d1", "grade": "1e999"}],
            r"export\.json \(task 1\): grade '1e999' is not one of",
        ),
        (
            [{"query_id": "q1", "doc_id": "d1", "grade": "-inf"}],
            r"export\.json \(task 1\): grade '-inf' is not one of",
        ),
        (
            [{"query_id": "q1", "doc_id": "d1"}],
            r"2 sampled pair\(s\) have no grade: graded 0, missing or skipped 2",
        ),
        ({"not": "a list"}, "expected a JSON list"),
    ],
)
def test_bad_exports_are_clear_errors(tmp_path: Path, records: Any, message: str) -> None:
    path = _export(tmp_path, records)
    with pytest.raises(InputError, match=message):
        read_labelstudio_export(path, MANIFEST)


def test_allow_missing_imports_only_graded_tasks(tmp_path: Path) -> None:
    path = _export(
        tmp_path,
        [{"query_id": "q1", "doc_id": "d1"}, {"query_id": "q1", "doc_id": "d2", "grade": "1"}],
    )
    result = read_labelstudio_export(path, MANIFEST, allow_missing=True)
    assert [(g.doc_id, g.grade) for g in result.grades] == [("d2", 1)]
    assert result.counts() == "graded 1, missing or skipped 1 of the 2 sampled pairs"


@pytest.mark.parametrize("grade", [{"choices": ["2", "0"]}, ["2", "0"]])
def test_a_json_min_record_with_two_grades_is_an_error_not_its_first(
    tmp_path: Path, grade: object
) -> None:
    from calibration.spotcheck.labelstudio import read_labelstudio_export
    from grader.errors import InputError

    path = tmp_path / "export.json"
    path.write_text(json.dumps([{"query_id": "q1", "doc_id": "d1", "grade": grade, "id": 1}]))
    with pytest.raises(InputError, match="several grades"):
        read_labelstudio_export(path, None)
