"""A sample holding a very long document opens, imports and calibrates (issue 25, point 1).

`relgrade sample` writes each document as the LLM saw it: cut to the budget of the prompt the
pair was graded with, with the prompt's marker and a `truncated` column. A judge without a
budget (the lexical judge) read the whole text, so the whole text goes in; every reader of
relgrade's own files (annotate, sample --import, calibrate, regrade --select) reads it back
whatever its size (Python's csv module stops at 131,072 characters unless told otherwise).
"""

from __future__ import annotations

import csv
import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from calibration.spotcheck.annotate.gradelog import GradeLog, grade_log_path
from calibration.spotcheck.annotate.server import AnnotateServer
from calibration.spotcheck.blind import neutral_scale, read_blind_csv
from grader.cli.main import main
from grader.models import PromptRef
from grader.prompts import load_prompt
from tests.helpers.judgments import write_judgments
from tests.helpers.sampling import make_judgment

LONG = 300_000


def _inputs(folder: Path) -> tuple[Path, Path]:
    queries = folder / "queries.tsv"
    queries.write_text("q1\tcache eviction\nq2\tretry backoff\n")
    docs = folder / "docs.jsonl"
    words = "cache eviction policy retry backoff "
    rows = [{"doc_id": "long", "text": (words * (LONG // len(words) + 1))[:LONG]}]
    rows += [{"doc_id": f"d{i}", "text": f"{words} doc {i}"} for i in range(7)]
    docs.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return queries, docs


def _judgments(folder: Path, prompt: PromptRef | None) -> Path:
    pairs = [("q1", "long"), *((f"q{1 + i % 2}", f"d{i}") for i in range(7))]
    judgments = [
        make_judgment(q, d, i % 4).model_copy(update={"prompt": prompt})
        for i, (q, d) in enumerate(pairs)
    ]
    path = folder / "j.jsonl"
    write_judgments(path, judgments)
    return path


def _state(items: list[Any], folder: Path) -> dict[str, Any]:
    """What the annotate page loads for these items (a real server on a real socket)."""
    server = AnnotateServer(items, GradeLog(grade_log_path(folder / "s.csv", "ann"), "ann"), [])
    server.scale = neutral_scale()
    url = server.start()
    try:
        with urllib.request.urlopen(url + "api/state", timeout=30) as resp:
            state: dict[str, Any] = json.loads(resp.read())
    finally:
        server.stop()
    return state


def _fill(sample: Path, out: Path) -> None:
    """The sample with every grade filled in, as a person would hand it back."""
    csv.field_size_limit(1 << 26)
    with sample.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    with out.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        for n, row in enumerate(rows):
            writer.writerow({**row, "grade": str(n % 4)})
    out.with_name(out.stem + ".manifest.json").write_text(
        sample.with_name(sample.stem + ".manifest.json").read_text()
    )


@pytest.mark.parametrize("judge", ["lexical", "passage@1"])
def test_a_sample_with_a_300000_character_document_opens_imports_and_calibrates(
    tmp_path: Path, judge: str, capsys: pytest.CaptureFixture[str]
) -> None:
    queries, docs = _inputs(tmp_path)
    spec = load_prompt("passage@1")
    ref = None if judge == "lexical" else PromptRef(name="passage", version="1", sha256=spec.sha256)
    judgments = _judgments(tmp_path, ref)
    sample = tmp_path / "s.csv"
    argv = ["sample", "--judgments", judgments, "--fraction", "1", "--strategy", "uniform"]
    argv += ["--queries", queries, "--docs", docs, "--out", sample]
    assert main([str(a) for a in argv]) == 0, capsys.readouterr().err

    items = read_blind_csv(sample)  # what `relgrade annotate` opens
    long = next(i for i in items if i.doc_id == "long")
    if ref is None:  # the lexical judge read the whole text: it is all there
        assert len(long.document) == LONG and not long.truncated
    else:  # the LLM saw the prompt's budget: so do people, told so
        assert long.truncated and long.document.endswith(spec.truncation_marker)
        assert len(long.document) <= spec.doc_budget_chars + len(spec.truncation_marker)
        assert "truncated" in sample.read_text().splitlines()[0]
        assert not any(i.truncated for i in items if i.doc_id != "long")
    state = _state(items, tmp_path)
    shown = next(i for i in state["items"] if i["doc_id"] == "long")
    assert shown["document"] == long.document and shown["truncated"] == long.truncated

    filled = tmp_path / "filled.csv"
    _fill(sample, filled)
    human = tmp_path / "human.csv"
    assert main(["sample", "--import", str(filled), "--out", str(human)]) == 0
    assert "imported 8 of 8" in capsys.readouterr().out
    code = main(["calibrate", "--llm", str(judgments), "--human", str(human), "--format", "json"])
    assert code == 0
    assert json.loads(capsys.readouterr().out)["n"] == 8
    # The sample itself as the human side, and as regrade's selection, reads whole too.
    code = main(["calibrate", "--llm", str(judgments), "--human", str(filled), "--format", "json"])
    assert code == 0 and json.loads(capsys.readouterr().out)["n"] == 8
