"""`relgrade grade` with an LLM judge keeps only the documents its selection needs: a large docs
file is streamed and the other documents are checked but not kept, with the same outputs."""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path
from typing import Any

import pytest

import grader.io.docs as docs_module
from grader.cli.main import main
from grader.errors import InputError
from grader.grading.pairs import pairs_to_grade
from grader.io.judgments import read_judgments
from grader.models import Doc, Query
from tests.fakeserver import FakeServer
from tests.grade_data import GradeFiles, write_grade_files

EXTRA_DOCS = 3000


@pytest.fixture
def files(tmp_path: Path) -> GradeFiles:
    """The small grading set, its docs file grown by EXTRA_DOCS documents no run names."""
    files = write_grade_files(tmp_path)
    with files.docs.open("a") as fh:
        for i in range(EXTRA_DOCS):
            fh.write(json.dumps({"doc_id": f"x{i}", "text": f"unneeded text {i} " * 20}) + "\n")
    return files


@pytest.fixture
def llm_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-docs")
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("RELGRADE_MODEL", raising=False)
    monkeypatch.delenv("RELGRADE_PRICES", raising=False)


def grade(files: GradeFiles, server: FakeServer, folder: Path) -> tuple[list[dict[str, Any]], str]:
    folder.mkdir()
    out, qrels = folder / "j.jsonl", folder / "q.txt"
    args = files.args("--base-url", server.base_url, "--store", folder / "s.db", "--quiet")
    assert main([*args, "--out", str(out), "--qrels-out", str(qrels)]) == 0
    skip = {"created_at", "latency_ms"}
    return [j.model_dump(exclude=skip) for j in read_judgments(out)], qrels.read_text()


@pytest.mark.slow
@pytest.mark.usefixtures("llm_env")
def test_llm_grading_keeps_only_the_needed_docs_and_outputs_are_unchanged(
    fake_server: FakeServer, files: GradeFiles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reader = docs_module.read_docs
    kept: list[int] = []

    def counting(path: str | Path, *, ids: Collection[str] | None = None) -> dict[str, Doc]:
        docs = reader(path, ids=ids)
        kept.append(len(docs))
        return docs

    monkeypatch.setattr(docs_module, "read_docs", counting)
    selected = grade(files, fake_server, tmp_path / "selected")
    assert kept == [files.n_pairs]  # one read, the 12 docs of the run out of 3,012

    def everything(path: str | Path, *, ids: Collection[str] | None = None) -> dict[str, Doc]:
        docs = reader(path)  # what grade read before: the whole file
        kept.append(len(docs))
        return docs

    monkeypatch.setattr(docs_module, "read_docs", everything)
    whole = grade(files, fake_server, tmp_path / "whole")
    assert kept[1] == files.n_pairs + EXTRA_DOCS
    assert selected == whole
    assert len(selected[0]) == files.n_pairs and selected[1].count("\n") > 0


@pytest.mark.usefixtures("llm_env")
def test_a_malformed_line_of_an_unneeded_doc_is_still_an_error(
    fake_server: FakeServer, files: GradeFiles, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = files.docs.read_text().splitlines(keepends=True)
    lines[2000] = '{"doc_id": "x1988", "text": "cut short\n'
    files.docs.write_text("".join(lines))
    args = files.args("--base-url", fake_server.base_url, "--store", tmp_path / "s.db", "--quiet")
    assert main(args) == 2
    assert f"{files.docs}:2001: not valid JSON" in capsys.readouterr().err
    assert fake_server.counts["requests"] == 0


def test_loader_is_asked_for_the_selected_doc_ids_only(tmp_path: Path) -> None:
    """After depth, deduplication and skip_judged; unknown ids are reported as before."""
    run = tmp_path / "run.txt"
    run.write_text("".join(f"q1 Q0 d{r} {r} {10 - r} t\n" for r in range(1, 6)))
    judged = tmp_path / "judged.qrels"
    judged.write_text("q1 0 d2 1\n")
    asked: list[set[str]] = []

    def loader(ids: set[str]) -> dict[str, Doc]:
        asked.append(ids)
        return {i: Doc(doc_id=i, text=f"text {i}") for i in sorted(ids) if i != "d3"}

    queries = {"q1": Query(query_id="q1", text="a query")}
    with pytest.raises(InputError, match=r"1 unknown doc id\(s\) \(d3\)"):
        pairs_to_grade([run, run], queries, loader, depth=3, skip_judged=[judged])
    selection = pairs_to_grade([run], queries, loader, depth=3, skip_missing=True)
    assert asked == [{"d1", "d3"}, {"d1", "d2", "d3"}]
    assert [p.doc.doc_id for p in selection.pairs] == ["d1", "d2"]
    assert selection.missing == 1 and selection.missing_doc_ids == ["d3"]
