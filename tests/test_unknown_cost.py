"""One "unknown cost" text: a model without a price costs "unknown (no price for the model)"
wherever a cost is printed (grade's dry run and summary, regrade's dry run and diff), never $0."""

from __future__ import annotations

from pathlib import Path

import pytest

from grader.cli.main import main
from grader.cost import NO_PRICE, spend_text, usd_or_unknown
from tests.batch_helpers import new_prompt, seed_store
from tests.fakeserver import FakeServer
from tests.grade_data import write_grade_files


def test_the_texts() -> None:
    assert usd_or_unknown(None) == "unknown (no price for the model)" == f"unknown ({NO_PRICE})"
    assert usd_or_unknown(0.0) == "$0.0000" and usd_or_unknown(0.01234) == "$0.0123"
    assert spend_text(0.5, 0) == "$0.5000"
    assert spend_text(0.0, 3) == "unknown for 3 request(s) (no price for the model; see --prices)"
    assert spend_text(0.25, 1).startswith("$0.2500 + unknown for 1 request(s) (no price")


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-unknown-cost")
    for name in ("OPENAI_BASE_URL", "RELGRADE_MODEL", "RELGRADE_PRICES"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("no_env")
def test_grade_dry_run_and_summary_say_unknown(
    fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_grade_files(tmp_path)
    args = files.args("--base-url", fake_server.base_url, "--store", tmp_path / "s.db")
    args += ["--model", "model-with-no-price", "--quiet"]
    assert main([*args, "--dry-run"]) == 0
    assert "estimated cost unknown (no price for the model)" in capsys.readouterr().err
    assert fake_server.counts["requests"] == 0
    assert main(args) == 0
    out = capsys.readouterr()
    # The fake server is on this machine: a local model has no price to add, no hint to --prices
    assert "(no price: a model served on this machine)" in out.out + out.err
    assert "--prices" not in out.out + out.err
    assert "$0.0000" not in out.out + out.err


def test_regrade_dry_run_says_unknown(
    no_env: None, fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    seed_store(db, 4)
    prompt = Path(new_prompt(tmp_path).source)
    argv = ["regrade", "--store", str(db), "--prompt", str(prompt), "--model", "no-price-model"]
    assert main([*argv, "--base-url", fake_server.base_url, "--dry-run"]) == 0
    err = capsys.readouterr().err
    assert "estimated unknown (no price for the model) live" in err
    assert "unknown (no price for the model) by batch" in err
