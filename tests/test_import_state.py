"""`import relgrade` (and a grading run through it) leaves the process's sqlite3 as it found
it: no adapter or converter registered for the whole process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import sqlite3, sys
adapters, converters = dict(sqlite3.adapters), dict(sqlite3.converters)
import relgrade as rg
after_import = dict(sqlite3.adapters), dict(sqlite3.converters)
import pandas as pd
pairs = pd.DataFrame({"query_id": ["q1", "q1"], "doc_id": ["d1", "d2"],
                      "query": ["sort a list"] * 2, "text": ["sort a list fast", "cats"]})
rg.grade(pairs, judge="lexical", store=sys.argv[1], progress=False)
rg.grade(pairs, judge="lexical", store=sys.argv[1], progress=False)  # read back from the store
after_grading = dict(sqlite3.adapters), dict(sqlite3.converters)
assert after_import == (adapters, converters), after_import
assert after_grading == (adapters, converters), after_grading
print("unchanged")
"""


def test_import_and_grading_register_no_sqlite3_adapter(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "s.db")],
        cwd=tmp_path,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "unchanged"
