"""Grade files written from rows, and calibrate run for its JSON: what the calibrate tests share."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from grader.cli.main import main

Rows = list[tuple[str, str, int]]
"""(query_id, doc_id, grade) rows."""


def write_qrels_rows(path: Path, rows: Rows) -> Path:
    path.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in rows))
    return path


def write_grades_csv(path: Path, rows: Rows) -> Path:
    path.write_text("query_id,doc_id,grade\n" + "".join(f"{q},{d},{g}\n" for q, d, g in rows))
    return path


def calibrate_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    assert main(["calibrate", *argv, "--format", "json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out
