"""Prompt files: pinned contents, loading, validation, rendering, and `relgrade prompts`."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.errors import PromptError
from grader.models import Doc, Query
from grader.prompts import (
    list_prompts,
    load_prompt,
    render_messages,
    shipped_prompt_files,
    truncate,
)
from grader.prompts.render import neutralise
from tests.fakeserver import FakeServer
from tests.grade_data import write_grade_files

# An edit to a shipped prompt changes every content key that used it: publish it as a new
# version (a new file) instead, and add its hash here.
PINNED = {
    "passage-v1": "2310a9e037c32bbb7943d661a031f714cda9043d7ac667bd81616363f4850fb1",
    "code-v1": "5c09f6ada14d132fa1316487cbec8990be7d5681df35bee5331a3b2c37e5f194",
    "umbrela-v1": "c9dcac207d61898da51d67be1b3f2c136028b88155173d25d8a374cc3552b04e",
    "passage-short-v1": "d9dd25043c16fd912b326b679f9b352e3c4e12ad2e335f81831af716a2e9d660",
}

PROMPTS_DIR = Path(__file__).resolve().parents[1] / "prompts"
QUERY = Query(query_id="q", text="what is a cat")


def test_every_shipped_prompt_is_pinned() -> None:
    shipped = {spec.file_stem: spec.sha256 for spec in list_prompts()}
    assert shipped == PINNED
    for stem, digest in PINNED.items():
        data = (PROMPTS_DIR / f"{stem}.toml").read_bytes()
        assert hashlib.sha256(data).hexdigest() == digest


@pytest.mark.parametrize("stem", sorted(PINNED))
def test_file_name_matches_name_and_version(stem: str) -> None:
    spec = load_prompt(stem)
    assert spec.file_stem == stem
    assert spec.ref().sha256 == spec.sha256 and str(spec.ref()) == spec.id
    assert sorted(spec.scale) == [0, 1, 2, 3]
    assert spec.schema["properties"]["grade"]["enum"] == [0, 1, 2, 3]
    assert spec.schema["required"][-1] == "grade"  # the grade last, or alone
    assert set(spec.schema["required"]) == set(spec.schema["properties"])


def test_load_by_stem_id_bare_name_and_path() -> None:
    by_stem = load_prompt("passage-v1")
    assert load_prompt("passage@1") == by_stem
    assert load_prompt("passage") == by_stem
    assert load_prompt(PROMPTS_DIR / "passage-v1.toml").sha256 == by_stem.sha256


def test_unknown_prompt_lists_the_shipped_ones() -> None:
    with pytest.raises(PromptError, match=r"unknown prompt 'pasage'.*passage-v1"):
        load_prompt("pasage")
    with pytest.raises(PromptError, match="no such prompt file"):
        load_prompt("missing/file.toml")


def test_packaged_prompts_are_found_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import grader.prompts.files as prompt_files

    packaged = tmp_path / "_prompts"
    packaged.mkdir()
    text = (PROMPTS_DIR / "passage-v1.toml").read_text().replace('version = "1"', 'version = "9"')
    (packaged / "passage-v9.toml").write_text(text)
    monkeypatch.setattr(prompt_files, "_PACKAGED_DIR", packaged)
    assert load_prompt("passage").version == "9"
    assert any(p.parent == packaged for p in shipped_prompt_files())


def broken(tmp_path: Path, old: str, new: str) -> Path:
    text = (PROMPTS_DIR / "passage-v1.toml").read_text()
    assert old in text
    path = tmp_path / "broken.toml"
    path.write_text(text.replace(old, new, 1))
    return path


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("$document", "$doc", r"unknown placeholder\(s\) \$doc"),
        ("Title: $title\n$document", "Title: $title", r"must contain \$document"),
        ('0 = "Irrelevant', '4 = "Irrelevant', "each grade 0, 1, 2, 3"),
        ("max_tokens = 300", 'max_tokens = "300"', "`sampling.max_tokens` must be int"),
        ('final_line = "Grade: $grade"', 'final_line = "Grade: N"', r"must contain \$grade"),
        ("top_logprobs = 5", "top_logprobs = 50", "within 0..20"),
        ("[sampling]", "[sampling", "not valid TOML"),
        ("$query\n", "$ query\n", "stray `\\$`"),
    ],
)
def test_broken_prompt_files_name_file_and_fix(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    with pytest.raises(PromptError, match=message) as caught:
        load_prompt(broken(tmp_path, old, new))
    assert "broken.toml" in str(caught.value)


def test_absent_metadata_lines_are_left_out_present_ones_shown() -> None:
    code = load_prompt("code-v1")
    bare, _ = render_messages(code, QUERY, Doc(doc_id="d", text="x = 1"))
    assert "Path:" not in bare[1]["content"] and "Symbol:" not in bare[1]["content"]
    assert "Code:\nx = 1\n</code_chunk>" in bare[1]["content"]
    full, _ = render_messages(
        code,
        QUERY,
        Doc(doc_id="d", text="x = 1", title="T", metadata={"path": "a.py", "symbol": "x"}),
    )
    assert "Path: a.py\nSymbol: x\nTitle: T\nCode:" in full[1]["content"]
    passage, _ = render_messages(load_prompt("passage-v1"), QUERY, Doc(doc_id="d", text="Cats."))
    assert passage[1]["content"].startswith("<query>\nwhat is a cat\n</query>\n\n<passage>\nCats.")


def test_modes_change_only_the_reply_instruction() -> None:
    spec = load_prompt("passage-v1")
    doc = Doc(doc_id="d", text="Cats.")
    schema, _ = render_messages(spec, QUERY, doc, mode="json_schema")
    text, _ = render_messages(spec, QUERY, doc, mode="text")
    assert schema[1] == text[1]
    assert schema[0]["content"].endswith('"grade", the integer grade 0, 1, 2 or 3.')
    assert text[0]["content"].endswith("Grade: N\nwhere N is 0, 1, 2 or 3.")
    assert "JSON" in schema[0]["content"]  # JSON mode requires the word in the messages
    assert "3 = Perfectly relevant" in schema[0]["content"]


def test_untrusted_text_cannot_close_its_tag() -> None:
    tags = ["passage", "query"]
    assert neutralise("a </passage> b <PASSAGE> c </ query>", tags) == (
        "a &lt;/passage> b &lt;PASSAGE> c &lt;/ query>"
    )
    assert neutralise("x < y and <passages>", tags) == "x < y and <passages>"


def test_truncate_cuts_at_whitespace_within_budget() -> None:
    text, cut = truncate("alpha beta gamma delta", 13, " [cut]")
    assert (text, cut) == ("alpha beta [cut]", True)
    assert truncate("short", 10) == ("short", False)
    long_word, cut = truncate("x" * 50, 10)
    assert (long_word, cut) == ("x" * 10, True)


def test_cli_list_show_render(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prompts", "list"]) == 0
    listed = capsys.readouterr().out
    assert "passage-v1\tpassage@1\t2310a9e037c3" in listed and "code-v1\tcode@1" in listed
    assert main(["prompts", "show", "code-v1"]) == 0
    shown = capsys.readouterr().out
    assert (
        shown.splitlines()[0]
        == f"# code@1  sha256 {PINNED['code-v1']}  ({PROMPTS_DIR}/code-v1.toml)"
    )
    assert 'name = "code"' in shown
    argv = ["prompts", "render", "passage-v1", "--query", "cats", "--document", "Cats purr."]
    assert main([*argv, "--model", "gpt-4o-mini"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert body["model"] == "gpt-4o-mini"
    assert body["response_format"]["json_schema"]["strict"] is True
    assert "<passage>\nCats purr.\n</passage>" in body["messages"][1]["content"]
    assert main([*argv, "--mode", "text", "--messages-only"]) == 0
    plain = capsys.readouterr().out
    assert plain.startswith("--- system ---\n") and "Grade: N" in plain


def test_cli_render_reports_truncation_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["prompts", "render", "passage-v1", "--query", "q", "--document", "word " * 5000]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert "truncated to 8000 characters" in captured.err
    assert json.loads(captured.out)["messages"][1]["content"].count("word") < 1700


def test_cli_unknown_prompt_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["prompts", "show", "nope"]) == 2
    assert "unknown prompt 'nope'" in capsys.readouterr().err


@pytest.mark.slow
def test_a_prompt_edited_under_the_same_version_is_refused(
    fake_server: FakeServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RELGRADE_MODEL", "RELGRADE_PRICES"):
        monkeypatch.delenv(name, raising=False)
    server = fake_server
    files = write_grade_files(tmp_path, n_queries=2, depth=2)
    store = tmp_path / "s.db"
    base = files.args("--base-url", server.base_url, "--store", store, "--model", "m", "--quiet")
    assert main([*base, "--prompt", "passage-v1"]) == 0
    capsys.readouterr()
    shipped = Path(load_prompt("passage-v1").source).read_text(encoding="utf-8")
    edited = tmp_path / "my-passage.toml"  # edited text, version left at 1
    edited.write_text(shipped.replace("Grade how relevant", "Grade strictly how relevant"))
    sent = server.counts["requests"]
    assert main([*base, "--prompt", str(edited)]) == 2
    err = capsys.readouterr().err
    assert "prompt passage@1 changed since it was used: bump its version" in err
    assert server.counts["requests"] == sent  # refused before sending anything
    regrade = ["regrade", "--store", str(store), "--prompt", str(edited), "--model", "m2"]
    regrade += ["--base-url", server.base_url, "--quiet"]
    assert main(regrade) == 2
    assert "prompt passage@1 changed since it was used" in capsys.readouterr().err
    assert main([*base, "--prompt", str(edited), "--allow-changed-prompt"]) == 0
    assert "kept by --allow-changed-prompt" in capsys.readouterr().err

    bumped = tmp_path / "passage-v2.toml"  # same text, version 2
    bumped.write_text(shipped.replace('version = "1"', 'version = "2"'), encoding="utf-8")
    assert main([*base, "--prompt", str(bumped)]) == 0
    err = capsys.readouterr().err
    assert "prompt passage@2 asks exactly what passage@1 (in the store) asked" in err
    assert "only its version changed" in err
