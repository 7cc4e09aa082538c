"""Reading Batch API output and error files: every key ends graded or with a stated problem."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from grader.batch.collect import failed_judgment, parse_result_files
from grader.models import Doc, Judgment, Query


def _items(n: int) -> dict[str, tuple[Query, Doc]]:
    return {
        f"k{i}": (Query(query_id="q", text="t"), Doc(doc_id=f"d{i}", text=f"x{i}"))
        for i in range(n)
    }


def _parse(body: Mapping[str, Any], query: Query, doc: Doc, key: str) -> Judgment:
    grade = json.loads(body["choices"][0]["message"]["content"])["grade"]
    if grade not in (0, 1, 2, 3):
        raise ValueError(f"grade {grade} out of range")
    return Judgment(
        query_id=query.query_id, doc_id=doc.doc_id, grade=grade, status="ok", judge="j", key=key
    )


def _out(key: str, content: str, status: int = 200) -> str:
    body = {"choices": [{"message": {"content": content}, "finish_reason": "stop"}]}
    return json.dumps(
        {"custom_id": key, "response": {"status_code": status, "body": body}, "error": None}
    )


def test_every_key_is_graded_or_has_a_problem() -> None:
    output = "\n".join(
        [
            _out("k0", '{"grade": 2}'),
            _out("k1", '{"grade": 9}'),
            "this line is not JSON",
            _out("k-unknown", '{"grade": 1}'),
            _out("k3", '{"grade": 1}', status=500),
        ]
    ).encode()
    errors = json.dumps(
        {"custom_id": "k2", "response": None, "error": {"code": "batch_expired", "message": "late"}}
    ).encode()
    parsed = parse_result_files(output, errors, items=_items(5), parse=_parse)
    assert {k: j.grade for k, j in parsed.judgments.items()} == {"k0": 2}
    problems = {k: p.type for k, p in parsed.problems.items()}
    assert problems == {
        "k1": "ValueError",
        "k2": "Batch:batch_expired",
        "k3": "Batch:http_500",
        "k4": "Batch:missing",
    }
    assert parsed.problems["k1"].raw_reply == '{"grade": 9}'
    query, doc = _items(5)["k4"]
    failed = failed_judgment("k4", query, doc, parsed.problems["k4"], judge_id="j", prompt=None)
    assert failed.status == "failed" and failed.grade is None
    assert failed.error is not None and failed.error.type == "Batch:missing"


def test_an_error_file_line_is_never_a_grade() -> None:
    """A line of the error file is a problem even when it carries a 200 body with a valid reply;
    an output line for the same request still decides."""
    errors = "\n".join([_out("k0", '{"grade": 3}'), _out("k1", '{"grade": 3}')]).encode()
    output = _out("k1", '{"grade": 1}').encode()
    parsed = parse_result_files(output, errors, items=_items(2), parse=_parse)
    assert {k: j.grade for k, j in parsed.judgments.items()} == {"k1": 1}
    assert parsed.problems["k0"].type.startswith("Batch:")
    assert "error line 1" in parsed.problems["k0"].message
