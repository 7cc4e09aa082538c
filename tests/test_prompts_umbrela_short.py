"""The shipped `umbrela-v1` (UMBRELA's method: intent match M, trustworthiness T, then the final
score) and `passage-short-v1` (passage-v1's instructions, the grade alone): what they ask, how
`prompts show/render` shows them, and a grading run through the fake server that reads their
replies, grade distribution included, in JSON and in text mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.io.judgments import read_judgments
from grader.prompts import load_prompt
from tests.fakeserver import FakeServer, faults
from tests.grade_data import GradeFiles, write_grade_files


@pytest.fixture
def files(tmp_path: Path) -> GradeFiles:
    return write_grade_files(tmp_path, n_queries=2, depth=3)


def test_umbrela_names_its_method_and_asks_its_steps_in_order() -> None:
    spec = load_prompt("umbrela")
    text = Path(spec.source).read_text(encoding="utf-8")
    assert spec.id == "umbrela@1" and "UMBRELA" in spec.description
    assert "castorini/umbrela" in text and "castorini/umbrela" in spec.description
    assert list(spec.schema["properties"]) == ["match", "trust", "grade"]
    for key in ("match", "trust", "grade"):
        assert spec.schema["properties"][key]["enum"] == [0, 1, 2, 3]
    steps = [spec.system.index(word) for word in ("intent", "(M)", "(T)", "(O)")]
    assert steps == sorted(steps)
    assert "reason" not in spec.schema["properties"]


def test_short_is_passage_v1_with_the_grade_alone() -> None:
    short, full = load_prompt("passage-short-v1"), load_prompt("passage-v1")
    assert (short.system, short.user, short.scale) == (full.system, full.user, full.scale)
    assert short.schema["required"] == ["grade"]
    assert list(short.schema["properties"]) == ["grade"]
    assert short.max_tokens < full.max_tokens
    assert load_prompt("passage") == full  # the default passage prompt is unchanged


@pytest.mark.parametrize("stem", ["umbrela-v1", "passage-short-v1"])
def test_show_and_render(stem: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prompts", "show", stem]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith(f"# {load_prompt(stem).id}  sha256")
    argv = ["prompts", "render", stem, "--query", "cats", "--document", "Cats purr."]
    assert main(argv) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["response_format"]["json_schema"]["schema"] == load_prompt(stem).schema
    assert "<passage>\nCats purr.\n</passage>" in body["messages"][1]["content"]


REPLIES = {
    "umbrela-v1": ('{"match": 2, "trust": 3, "grade": 2}', "M: 2\nT: 3\nGrade: 2"),
    "passage-short-v1": ('{"grade": 2}', "Grade: 2"),
}


@pytest.mark.parametrize("stem", sorted(REPLIES))
@pytest.mark.parametrize("mode", ["json_schema", "text"])
def test_grading_reads_the_replies(
    stem: str, mode: str, fake_server: FakeServer, files: GradeFiles, tmp_path: Path
) -> None:
    content = REPLIES[stem][0 if mode == "json_schema" else 1]
    fake_server.enqueue(*[faults.content(content) for _ in range(files.n_pairs)])
    out = tmp_path / "j.jsonl"
    args = files.args("--base-url", fake_server.base_url, "--store", tmp_path / "s.db")
    args += ["--prompt", stem, "--output-mode", mode, "--out", str(out), "--quiet"]
    assert main(args) == 0
    judgments = read_judgments(out)
    assert len(judgments) == files.n_pairs
    assert all(j.status == "ok" and j.grade == 2 for j in judgments)
    assert all(j.prompt is not None and j.prompt.name == stem.rsplit("-v", 1)[0] for j in judgments)
    if mode == "json_schema":  # the grade's token found in the reply, wherever the key is
        assert all(j.distribution is not None for j in judgments)
    sent = fake_server.requests
    assert all(body["max_tokens"] == load_prompt(stem).max_tokens for body in sent)
