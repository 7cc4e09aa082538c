"""Adding a field to `Judgment` or `Usage` is a change to grader/models.py alone: a copy of the
package whose models.py alone gains one field in each stores judgments with them, reads them
back, streams them to `--out` lines as a rerun does, and takes them from a row made as an
import's workers make one (fields by name, the others at the model's defaults)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Run in the edited copy: the live path, the import workers' row, the rerun's --out lines.
SCRIPT = r"""
import json, sys
from datetime import UTC, datetime
from grader.models import Judgment, Usage
from grader.store.reading import StoredReader, look_up
from grader.store.store import Store

path = sys.argv[1]
live = Judgment(query_id="q1", doc_id="d1", grade=2, status="ok", judge="llm:m1",
                key="sha256:" + "b" * 64, usage=Usage(prompt_tokens=3, reasoning_tokens=7),
                novelty="new")
imported = {"key": "sha256:" + "c" * 64, "query_id": "q2", "doc_id": "d2", "status": "ok",
            "grade": 1, "usage": Usage(reasoning_tokens=5),
            "created_at": datetime(2026, 5, 6, tzinfo=UTC)}
with Store(path) as store:
    store.put_many([(live, {"model": "m1"})])
    source = store.source_for("llm:m1", None, {"model": "m1"})
    store.write_stored_parts([[store.stored_row(imported, source)]])[0]
    got = store.get_many([live.key, imported["key"]])
rows = [(bytes.fromhex("b" * 64), "q1", "d1"), (bytes.fromhex("c" * 64), "q2", "d2")]
found = look_up(path, rows)
refs = [(rowid, q, d, k) for rowid, (k, q, d) in zip(found.rowids, rows)]
with StoredReader(path) as reader:
    lines = "".join(block.lines for block in reader.blocks(refs)).splitlines()
print(json.dumps({
    "read": {k: json.loads(j.model_dump_json()) for k, j in got.items()},
    "expected_live": json.loads(live.model_dump_json()),
    "lines": [json.loads(line) for line in lines],
}))
"""


def _package_with_new_fields(folder: Path) -> Path:
    """A copy of the `grader` package whose models.py gains `Usage.reasoning_tokens` and
    `Judgment.novelty`, nothing else changed."""
    shutil.copytree(
        ROOT / "grader", folder / "grader", ignore=shutil.ignore_patterns("__pycache__")
    )
    models = folder / "grader" / "models.py"
    text = models.read_text(encoding="utf-8")
    edits = {
        "    cached_tokens: int = 0\n": "    reasoning_tokens: int = 0\n",
        "    verification: dict[str, Any] | None = None\n": "    novelty: str | None = None\n",
    }
    for anchor, field in edits.items():
        assert text.count(anchor) == 1, anchor
        text = text.replace(anchor, anchor + field)
    models.write_text(text, encoding="utf-8")
    return folder


@pytest.mark.slow
def test_a_field_added_to_the_models_alone_is_stored_read_and_streamed(tmp_path: Path) -> None:
    package = _package_with_new_fields(tmp_path / "edited")
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path / "s.db")],
        cwd=package,
        env={"PYTHONPATH": str(package), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    live, imported = "sha256:" + "b" * 64, "sha256:" + "c" * 64
    read = out["read"]
    assert read[live] == out["expected_live"]
    assert read[live]["novelty"] == "new" and read[live]["usage"]["reasoning_tokens"] == 7
    assert read[imported]["novelty"] is None  # not named by the worker: the model's default
    assert read[imported]["usage"]["reasoning_tokens"] == 5
    # the rerun's --out lines: each stored judgment whole, equal as JSON to the model's
    assert out["lines"] == [read[live], read[imported]]
