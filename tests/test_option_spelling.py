"""An error names the fix its caller can use: the flag on the command line (`--clamp`), the
keyword from Python (`clamp=True`), whichever reader (file or table) raised it."""

from __future__ import annotations

from pathlib import Path

import pytest

import relgrade as rg
from grader.cli.main import main
from grader.spelling import command_line, option
from tests.grade_data import write_grade_files


def _files(tmp_path: Path) -> tuple[Path, Path, Path]:
    qrels = tmp_path / "qrels.txt"
    qrels.write_text("q1 0 d1 5\nq1 0 d2 1\n")
    csv = tmp_path / "human.csv"
    csv.write_text("query_id,doc_id,grade\nq1,d1,5\nq1,d2,1\n")
    run = tmp_path / "run.txt"
    run.write_text("q1 Q0 d1 1 2.0 r\nq1 Q0 d2 2 1.0 r\n")
    return qrels, csv, run


def test_evaluate_names_clamp_as_the_caller_spells_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, csv, run = _files(tmp_path)
    assert main(["evaluate", str(csv), str(run), "-m", "nDCG@10"]) == 2
    err = capsys.readouterr().err
    assert "outside 0..3" in err and "--clamp" in err and "clamp=True" not in err
    with pytest.raises(rg.InputError) as raised:
        rg.evaluate(str(csv), {"r": str(run)}, measures=["nDCG@10"])
    assert "outside 0..3" in str(raised.value)
    assert "clamp=True" in str(raised.value) and "--clamp" not in str(raised.value)


def test_calibrate_names_clamp_as_the_caller_spells_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """TREC qrels and a table (the readers raising differ), by the command and by Python."""
    qrels, _, _ = _files(tmp_path)
    human = tmp_path / "people.csv"
    human.write_text("query_id,doc_id,grade\nq1,d1,3\nq1,d2,1\n")
    assert main(["calibrate", "--llm", str(qrels), "--human", str(human)]) == 2
    err = capsys.readouterr().err
    assert "outside 0..3" in err and "--clamp" in err and "clamp=True" not in err
    for llm in (str(qrels), {"q1": {"d1": 5, "d2": 1}}):
        with pytest.raises(rg.InputError) as raised:
            rg.calibrate(llm, str(human))
        assert "outside 0..3" in str(raised.value)
        assert "clamp=True" in str(raised.value) and "--clamp" not in str(raised.value)


def test_a_budget_without_a_price_names_the_keywords(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-spelling")
    monkeypatch.delenv("RELGRADE_PRICES", raising=False)
    files = write_grade_files(tmp_path)
    where = ["--base-url", "http://127.0.0.1:9/v1", "--model", "model-with-no-price"]
    args = files.args(*where, "--store", tmp_path / "s.db", "--max-cost", "1")
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--max-cost needs a price" in err and "--prices" in err
    with pytest.raises(rg.InputError) as raised:
        rg.grade(
            runs=str(files.run),
            queries=str(files.queries),
            docs=str(files.docs),
            model="model-with-no-price",
            base_url="http://127.0.0.1:9/v1",
            store=str(tmp_path / "s2.db"),
            max_cost=1.0,
            progress=False,
        )
    text = str(raised.value)
    assert "max_cost needs a price" in text and "prices=" in text and "--" not in text


def test_the_command_line_spelling_ends_with_the_command() -> None:
    assert option("--clamp", "clamp=True") == "clamp=True"
    with command_line():
        assert option("--clamp", "clamp=True") == "--clamp"
    assert option("--clamp", "clamp=True") == "clamp=True"


def test_grade_names_its_keywords_from_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The checks of grade's options, from the command and from Python."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    files = write_grade_files(tmp_path)
    store = tmp_path / "s.db"
    cases = [
        (["--concurrency", "0"], {"concurrency": 0}, ("--concurrency", "concurrency must")),
        (["--depth", "0"], {"depth": 0}, ("--depth", "depth must")),
        ([], {}, ("--base-url", "base_url=")),
    ]
    for flags, keywords, (flag, keyword) in cases:
        assert main([*files.args("--store", store), *flags]) == 2
        assert flag in capsys.readouterr().err
        with pytest.raises(rg.InputError) as raised:
            rg.grade(
                runs=str(files.run),
                queries=str(files.queries),
                docs=str(files.docs),
                store=str(store),
                progress=False,
                **keywords,  # type: ignore[arg-type]
            )
        assert keyword in str(raised.value) and "--" not in str(raised.value), raised.value
    with pytest.raises(rg.InputError, match="queries= and docs=") as raised:
        rg.grade(runs=str(files.run), judge="lexical", store=str(store), progress=False)
    assert "--" not in str(raised.value)
