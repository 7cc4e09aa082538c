"""The README says what works: its set-up block has the shape `.ci/run` reads, its quickstart
runs as written (from a folder holding `examples/`), it stays short, and its links resolve."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from grader.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

PENDING_PAGES: set[str] = set()
"""Pages other work in progress writes; linked from the README's map before they land."""


def _section(text: str, heading: str) -> str:
    """The text under `heading` up to the next heading of the same or a higher level (a `#`
    line inside a code block is a comment, not a heading)."""
    level = len(heading.split(" ")[0])
    lines = text.splitlines(keepends=True)
    start = lines.index(heading + "\n") + 1
    fenced = False
    for end in range(start, len(lines)):
        line = lines[end]
        fenced = fenced != line.startswith("```")
        hashes = len(line) - len(line.lstrip("#"))
        if not fenced and 0 < hashes <= level and line[hashes : hashes + 1] == " ":
            return "".join(lines[start:end])
    return "".join(lines[start:])


def _blocks(section: str) -> list[list[str]]:
    """The lines of each fenced code block, continuation lines (`\\`) joined."""
    blocks = []
    for body in re.findall(r"^```[a-z]*\n(.*?)^```", section, flags=re.MULTILINE | re.DOTALL):
        joined = body.replace("\\\n", " ")
        blocks.append([line for line in joined.splitlines() if line.strip()])
    return blocks


def test_set_up_block_is_the_install_then_the_test_command() -> None:
    # .ci/run takes the first two lines of the first block under "## Set up" (awk).
    first = _blocks(_section(README.read_text(encoding="utf-8"), "## Set up"))[0]
    assert first[:2] == ['python -m pip install -e ".[dev]"', "python -m pytest"]


def test_readme_is_short_and_names_the_quick_loop() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    assert 'python -m pytest -m "not slow"' in text


def test_readme_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    links = set(re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text))
    assert {"docs/evaluate.md", "bench/README.md", "CHANGELOG.md"} <= links
    missing = sorted(link for link in links - PENDING_PAGES if not (ROOT / link).exists())
    assert missing == []


def test_docs_pages_link_to_files_that_exist() -> None:
    for page in sorted((ROOT / "docs").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for link in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
            target = (page.parent / link).resolve()
            relative = target.relative_to(ROOT).as_posix()
            assert target.exists() or relative in PENDING_PAGES, (page.name, link)


def _run(line: str, capsys: pytest.CaptureFixture[str]) -> str:
    argv = shlex.split(line)
    assert argv[0] == "relgrade", line
    capsys.readouterr()
    assert main(argv[1:]) == 0, line
    captured = capsys.readouterr()
    return captured.out + captured.err


@pytest.mark.slow  # grades, evaluates and calibrates with the HTML report: a few seconds
def test_quickstart_runs_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    section = _section(README.read_text(encoding="utf-8"), "## Quickstart (offline, no LLM needed)")
    grade, scoring = _blocks(section)[:2]
    command, said = grade
    assert said.startswith("# graded")
    first = _run(command, capsys)
    assert said.removeprefix("# ") in first
    assert "graded 0, cached 174" in _run(command, capsys)  # the rerun the README promises
    for line in scoring:
        _run(line, capsys)
    assert (tmp_path / "judgments.jsonl").is_file() and (tmp_path / "llm.qrels").is_file()
    assert "<html" in (tmp_path / "report.html").read_text(encoding="utf-8").lower()
    python = "\n".join(_blocks(section)[2])  # "From Python or a notebook", after the commands
    names: dict[str, Any] = {}
    exec(compile(python, "README.md", "exec"), names)
    assert set(names["labels"].status) == {"ok"} and len(names["labels"]) == 174
    assert set(names["scores"].measure) == {"nDCG@10", "P(rel=2)@10"}
    assert names["report"].to_dict()["n"] > 0 and "<" in names["report"]._repr_html_()
