"""`regrade` with only a new prompt keeps the model of the selected judgments (as it keeps their
prompt when only --model is given): never a default model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.io.judgments import read_judgments
from grader.keys import content_key
from grader.models import Doc, Judgment, Query
from grader.regrade.selection import judge_models
from grader.store.store import Store
from grader.store.writing import text_rows
from tests.batch_helpers import OLD_REF, new_prompt, seed_store
from tests.fakeserver import FakeServer


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RELGRADE_PRICES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RELGRADE_MODEL", "a-default-model")  # must not be taken either


def test_a_new_prompt_alone_regrades_with_the_stored_model(
    fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    seed_store(db, 6)  # graded by openai:old-model
    out = tmp_path / "new.jsonl"
    prompt = new_prompt(tmp_path).source
    code = main(
        ["regrade", "--store", str(db), "--prompt", str(prompt), "--base-url",
         fake_server.base_url, "--quiet", "--format", "json", "--out", str(out)]
    )  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert json.loads(captured.out)["sent"] == 6
    assert {body["model"] for body in fake_server.requests} == {"old-model"}
    assert {j.judge for j in read_judgments(out)} == {"openai:old-model"}
    assert "model old-model (from the selected judgments" in captured.err


def test_a_selection_of_several_models_asks_for_one(
    fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    seed_store(db, 3)  # openai:old-model
    fingerprint = {"judge": "openai:other-model", "prompt_sha": OLD_REF.sha256}
    query, doc = Query(query_id="q9", text="another topic"), Doc(doc_id="d9", text="a passage")
    other = Judgment(
        query_id="q9",
        doc_id="d9",
        grade=2,
        status="ok",
        judge="openai:other-model",
        prompt=OLD_REF,
        key=content_key(fingerprint, query.text, doc.text),
    )
    with Store(db) as store:
        store.put_many([(other, fingerprint)])
        store.put_text_rows(*text_rows([query], [doc]))
    prompt = new_prompt(tmp_path).source
    args = ["regrade", "--store", str(db), "--base-url", fake_server.base_url, "--quiet"]
    code = main([*args, "--prompt", str(prompt)])
    err = capsys.readouterr().err
    assert code == 2
    assert "openai:other-model" in err and "openai:old-model" in err and "--model" in err
    assert fake_server.counts["requests"] == 0


@pytest.mark.parametrize(
    ("judge", "models"),
    [
        ("openai:gpt-4o-mini", ["gpt-4o-mini"]),
        ("ensemble(openai:a,openai:b/c)", ["a", "b/c"]),
        ("openai:a+verify:openai:b", ["a"]),
        ("lexical", None),
        ("lexical+1a2b3c4d", None),
    ],
)
def test_the_models_of_a_judge_id(judge: str, models: list[str] | None) -> None:
    assert judge_models(judge) == models
