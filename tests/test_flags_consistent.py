"""Flags mean one thing in every command, through the command line: `-m` and `--run` take several
values either way, the LLM flags one help text and default, `--skip-missing` one meaning, `--store`
one default, `regrade` defaults its prompt and takes an ensemble, `sample` takes qrels, `calibrate
--judge` lists the judges, and every command and sub-command describes itself in `--help`."""

from __future__ import annotations

import argparse
import csv
import inspect
import json
from pathlib import Path
from typing import Any

import pytest

from grader import defaults
from grader.cli.flags import COMMANDS
from grader.cli.main import build_parser, main
from grader.grading.pipeline import grade_pairs
from grader.io.judgments import read_judgments
from grader.judges.llm.judge import LLMJudge
from grader.regrade.run import regrade
from grader.store.store import Store
from tests.batch_helpers import new_prompt
from tests.fakeserver import FakeServer, default_grade
from tests.grade_data import GradeFiles, write_grade_files

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "code-search"
BM25, WEAK = EXAMPLES / "run.bm25.txt", EXAMPLES / "run.weak.txt"


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> Any:
    capsys.readouterr()
    assert main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _help(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        main([*argv, "--help"])
    assert stop.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse wraps lines: compare words


@pytest.fixture(scope="module")
def lexical(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Judgments of both example runs by the offline lexical judge."""
    folder = tmp_path_factory.mktemp("lexical")
    out = folder / "judgments.jsonl"
    argv = ["grade", "--queries", str(EXAMPLES / "queries.tsv"), "--docs"]
    argv += [str(EXAMPLES / "docs.jsonl"), "--run", str(BM25), str(WEAK), "--judge", "lexical"]
    argv += ["--store", str(folder / "s.db"), "--out", str(out), "--quiet"]
    assert main(argv) == 0
    return out


# -m and --run: several values, either way --------------------------------------------------


def test_evaluate_takes_several_measures_either_way_after_the_files(
    capsys: pytest.CaptureFixture[str],
) -> None:
    qrels = str(EXAMPLES / "human.csv")
    base = ["evaluate", qrels, str(BM25), str(WEAK), "--format", "json"]
    spread = _json(capsys, [*base, "-m", "P(rel=2)@5", "RR(rel=2)@10"])
    repeated = _json(capsys, [*base, "-m", "P(rel=2)@5", "-m", "RR(rel=2)@10"])
    assert spread == repeated
    assert {(r["run"], r["measure"]) for r in spread} == {
        (run, m) for run in ("run.bm25", "run.weak") for m in ("P(rel=2)@5", "RR(rel=2)@10")
    }
    # -m first, its list ended by --: QRELS and RUN still parse as positionals.
    first = _json(capsys, ["evaluate", "--format", "json", "-m", "P(rel=2)@5", "RR(rel=2)@10",
                           "--", qrels, str(BM25), str(WEAK)])  # fmt: skip
    assert first == spread


@pytest.mark.slow
def test_calibrate_takes_several_measures_and_runs_either_way(
    lexical: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Queries q01-q06 of 12 graded whole (a pair sample ranks no system); the other
    # LLM-graded pairs make the PPI++ estimates section.
    rows = list(csv.DictReader((EXAMPLES / "human.csv").open(encoding="utf-8")))
    kept = [(r["query_id"], r["doc_id"], r["grade"]) for r in rows if r["query_id"] <= "q06"]
    half = tmp_path / "half.csv"
    half.write_text("query_id,doc_id,grade\n" + "".join(f"{q},{d},{g}\n" for q, d, g in kept))
    table_argv = ["calibrate", "--llm", str(lexical), "--human", str(half), "--bootstrap", "20"]
    base = [*table_argv, "--format", "json"]
    spread = _json(capsys, [*base, "--run", str(BM25), str(WEAK), "-m", "nDCG@10", "P@10"])
    repeated = _json(
        capsys, [*base, "--run", str(BM25), "--run", str(WEAK), "-m", "nDCG@10", "-m", "P@10"]
    )
    assert spread == repeated
    # `systems` stays the first measure's object (the JSON contract); every measure by name.
    assert spread["systems"]["measure"] == "nDCG@10"
    by_measure = spread["systems_by_measure"]
    assert list(by_measure) == ["nDCG@10", "P(rel=2)@10"]
    assert by_measure["nDCG@10"] == spread["systems"]
    assert by_measure["P(rel=2)@10"]["measure"] == "P(rel=2)@10"
    for section in by_measure.values():
        assert sorted(r["run"] for r in section["per_system"]) == ["run.bm25", "run.weak"]
    # The P@10 column is not the nDCG@10 one (each measure was really computed).
    assert by_measure["P(rel=2)@10"]["per_system"] != by_measure["nDCG@10"]["per_system"]
    estimates = spread["estimates"]
    assert estimates["runs_by_measure"]["nDCG@10"] == estimates["runs"]
    assert {e["measure"] for e in estimates["runs_by_measure"]["P(rel=2)@10"].values()} == {
        "P(rel=2)@10"
    }
    # One measure: the same `systems` as before, and `systems_by_measure` holds just it.
    one = _json(capsys, [*base, "--run", str(BM25), str(WEAK), "-m", "nDCG@10"])
    assert one["systems"] == spread["systems"] and list(one["systems_by_measure"]) == ["nDCG@10"]
    # The table shows a systems table per measure.
    capsys.readouterr()
    assert main([*table_argv, "--run", str(BM25), str(WEAK), "-m", "nDCG@10", "P@10"]) == 0
    table = capsys.readouterr().out
    assert "Systems by nDCG@10" in table and "Systems by P(rel=2)@10" in table


def test_grade_takes_several_runs_either_way(tmp_path: Path) -> None:
    common = ["grade", "--queries", str(EXAMPLES / "queries.tsv"), "--docs"]
    common += [str(EXAMPLES / "docs.jsonl"), "--judge", "lexical", "--quiet"]
    spread, repeated = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    argv = [*common, "--store", str(tmp_path / "a.db"), "--out", str(spread)]
    assert main([*argv, "--run", str(BM25), str(WEAK)]) == 0
    argv = [*common, "--store", str(tmp_path / "b.db"), "--out", str(repeated)]
    assert main([*argv, "--run", str(BM25), "--run", str(WEAK)]) == 0
    only_bm25 = tmp_path / "c.jsonl"
    argv = [*common, "--store", str(tmp_path / "c.db"), "--out", str(only_bm25)]
    assert main([*argv, "--run", str(BM25)]) == 0
    pairs = {(j.query_id, j.doc_id) for j in read_judgments(spread)}
    assert pairs == {(j.query_id, j.doc_id) for j in read_judgments(repeated)}
    assert len(pairs) > len(read_judgments(only_bm25))  # the weak run's pairs are in


@pytest.mark.parametrize(
    ("command", "runs", "measures"),
    [
        (["evaluate"], False, True),
        (["grade"], True, False),
        (["calibrate"], True, True),
        (["regrade"], True, True),
    ],
)
def test_help_says_several_values_go_either_way(
    capsys: pytest.CaptureFixture[str], command: list[str], runs: bool, measures: bool
) -> None:
    text = _help(capsys, command)
    if runs:
        assert "--run A B or --run A --run B" in text
    if measures:
        assert "-m A B or -m A -m B" in text


# --skip-missing: one meaning -------------------------------------------------------------


def test_evaluate_skip_missing_is_a_deprecated_alias_of_trec_eval_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    qrels = tmp_path / "q.qrels"
    qrels.write_text("q1 0 d1 2\nq2 0 d2 2\n", encoding="utf-8")
    run = tmp_path / "r.txt"
    run.write_text("q1 Q0 d1 1 1.0 t\n", encoding="utf-8")  # q2 unanswered
    base = ["evaluate", str(qrels), str(run), "-m", "P(rel=2)@1", "--format", "json"]
    counted = _json(capsys, base)
    capsys.readouterr()
    assert main([*base, "--trec-eval-missing"]) == 0
    new = capsys.readouterr()
    assert main([*base, "--skip-missing"]) == 0
    old = capsys.readouterr()
    assert json.loads(new.out) == json.loads(old.out) != counted
    assert [r["value"] for r in json.loads(old.out)] == [1.0]  # q2 left out of the mean
    assert "deprecated" in old.err and "--trec-eval-missing" in old.err
    assert "deprecated" not in new.err
    evaluate_help = _help(capsys, ["evaluate"])
    assert "--trec-eval-missing" in evaluate_help and "--skip-missing" not in evaluate_help
    grade_help = _help(capsys, ["grade"])
    assert "--skip-missing skip pairs whose query or doc id is not in" in grade_help


# --store: one default ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "command", [["grade"], ["sample"], ["regrade"], ["batch", "status"], ["batch", "collect"]]
)
def test_store_defaults_to_relgrade_db_everywhere(
    capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    assert "--store DB" in _help(capsys, command)
    assert "(default relgrade.db)" in _help(capsys, command)


@pytest.mark.slow
@pytest.mark.usefixtures("llm_env")
def test_regrade_and_batch_use_the_default_store_of_grade(
    fake_server: FakeServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    files = write_grade_files(tmp_path)
    monkeypatch.chdir(tmp_path)
    url = fake_server.base_url
    grade = files.args("--base-url", url, "--model", "model-a", "--quiet")
    assert main(grade) == 0 and (tmp_path / "relgrade.db").is_file()
    diff = _json(capsys, ["regrade", "--model", "model-b", "--base-url", url, "--quiet",
                          "--format", "json"])  # fmt: skip
    assert diff["n"] == files.n_pairs and diff["sent"] == files.n_pairs
    jobs = _json(capsys, ["batch", "status", "--no-refresh", "--format", "json"])
    assert jobs == []


# regrade: the stored prompt by default; several models ----------------------------------


def _swap_b(body: dict[str, Any]) -> int:
    grade = default_grade(body)
    return 3 - grade if body.get("model") == "model-b" else grade


def _grade(files: GradeFiles, db: Path, url: str, *models: str) -> None:
    argv = files.args("--base-url", url, "--store", db, "--quiet", "--prompt", "passage")
    assert main([*argv, "--model", *models]) == 0


@pytest.mark.slow
@pytest.mark.usefixtures("llm_env")
def test_regrade_defaults_to_the_stored_prompt_and_takes_an_ensemble(
    fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_grade_files(tmp_path)
    fake_server.grade_fn = _swap_b
    db, url = tmp_path / "s.db", fake_server.base_url
    _grade(files, db, url, "model-a")
    assert fake_server.counts["requests"] == files.n_pairs
    out = tmp_path / "ens.jsonl"
    base = ["regrade", "--store", str(db), "--base-url", url, "--quiet", "--format", "json"]
    capsys.readouterr()
    code = main([*base, "--model", "model-a", "model-b", "--out", str(out),
                 "--run", str(files.run), "-m", "P(rel=2)@4", "RR(rel=2)"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "prompt passage@1 (from the selected judgments" in captured.err
    diff = json.loads(captured.out)
    # model-a's stored answers are reused: only model-b is asked, once per pair.
    assert diff["n"] == files.n_pairs and fake_server.counts["requests"] == 2 * files.n_pairs
    new = read_judgments(out)
    assert len(new) == files.n_pairs
    for j in new:
        assert j.judges is not None and set(j.judges) == {"openai:model-a", "openai:model-b"}
        assert j.prompt is not None and str(j.prompt) == "passage@1"
    deltas = {(d["run"], d["measure"]) for d in diff["metric_deltas"]}
    assert deltas == {("run", "P(rel=2)@4"), ("run", "RR(rel=2)")}
    # `--model A --model B` is the same ensemble: everything is already regraded.
    again = _json(capsys, [*base, "--model", "model-a", "--model", "model-b"])
    assert again["sent"] == 0 and fake_server.counts["requests"] == 2 * files.n_pairs
    assert again["n"] == files.n_pairs and again["transition"] == diff["transition"]
    # An ensemble does not go through the Batch API.
    capsys.readouterr()
    assert main([*base, "--model", "model-a", "model-b", "--batch"]) == 2
    assert "ensemble" in capsys.readouterr().err


@pytest.mark.usefixtures("llm_env")
def test_regrade_without_prompt_names_the_prompts_when_they_differ(
    fake_server: FakeServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = write_grade_files(tmp_path)
    db, url = tmp_path / "s.db", fake_server.base_url
    _grade(files, db, url, "model-a")
    v2 = new_prompt(tmp_path)  # passage@2, a file that is not shipped
    some = tmp_path / "some.txt"
    some.write_text("q0 d0\nq0 d1\n", encoding="utf-8")
    base = ["regrade", "--store", str(db), "--base-url", url, "--quiet", "--format", "json"]
    _json(capsys, [*base, "--prompt", v2.source, "--model", "model-a", "--select", "sample",
                   str(some)])  # fmt: skip
    assert main([*base, "--model", "model-b"]) == 2
    err = capsys.readouterr().err
    assert "2 prompts: passage@1" in err and "passage@2" in err and "--prompt" in err
    # Narrowed to the pairs of passage@2, whose file is not shipped: asked for that file.
    assert main([*base, "--model", "model-b", "--select", "sample", str(some)]) == 2
    err = capsys.readouterr().err
    assert "passage@2" in err and "is not a shipped prompt" in err and "--prompt FILE" in err
    with Store(db) as store:
        assert store.count() == files.n_pairs + 2  # nothing was graded by the refused runs


# sample takes qrels; calibrate lists judges ------------------------------------------------


def test_sample_draws_from_trec_qrels_except_by_uncertainty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)  # no relgrade.db here: the sample holds ids only
    qrels = tmp_path / "llm.qrels"
    lines = [f"q{i // 10} 0 d{i} {i % 4}\n" for i in range(40)]
    qrels.write_text("".join(lines), encoding="utf-8")
    base = ["sample", "--judgments", str(qrels), "--n", "8"]
    for strategy in ("stratified", "uniform", "active", "low", "query-balanced", "whole-queries"):
        out = tmp_path / f"{strategy}.csv"
        capsys.readouterr()
        assert main([*base, "--strategy", strategy, "--out", str(out)]) == 0, strategy
        drawn = list(csv.DictReader(out.open(encoding="utf-8")))
        assert drawn and all(r["grade"] == "" for r in drawn)  # blind: no LLM grade
        manifest = json.loads(out.with_suffix(".manifest.json").read_text(encoding="utf-8"))
        assert manifest["population"] == 40 and manifest["strategy"] == strategy
    capsys.readouterr()
    code = main([*base, "--strategy", "uncertainty", "--out", str(tmp_path / "u.csv")])
    assert code == 2
    err = capsys.readouterr().err
    assert "llm.qrels" in err and "uncertainty" in err and "qrels hold grades only" in err
    assert not (tmp_path / "u.csv").exists()


def test_calibrate_with_an_unknown_judge_lists_the_judges(
    lexical: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    two = tmp_path / "two.jsonl"
    lines = lexical.read_text(encoding="utf-8").splitlines()
    other = [json.loads(line) | {"judge": "openai:gpt-4o-mini"} for line in lines[:5]]
    two.write_text("\n".join([*lines, *map(json.dumps, other)]) + "\n", encoding="utf-8")
    capsys.readouterr()
    argv = ["calibrate", "--llm", str(two), "--human", str(EXAMPLES / "human.csv")]
    assert main([*argv, "--judge", "gpt-4o"]) == 2
    err = capsys.readouterr().err
    assert "no judgments by judge 'gpt-4o'" in err and "two.jsonl" in err
    assert f"'lexical' ({len(lines)} lines)" in err and "'openai:gpt-4o-mini' (5 lines)" in err
    assert main([*argv, "--judge", "openai:gpt-4o-mini", "--bootstrap", "0"]) == 0


# --help describes every command and sub-command -----------------------------------------


SUBCOMMANDS = [[name] for name in COMMANDS] + [
    ["batch", "status"],
    ["batch", "collect"],
    ["prompts", "list"],
    ["prompts", "show"],
    ["prompts", "render"],
]


@pytest.mark.parametrize("command", SUBCOMMANDS, ids=" ".join)
def test_every_command_help_has_a_description(
    capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    text = capsys.readouterr().out
    usage, _, rest = text.partition("\n\n")
    assert usage.startswith("usage: relgrade " + " ".join(command))
    description = rest.split("\n\n")[0].strip()
    # A description is prose before the argument lists, not the next heading.
    assert not description.startswith(("options:", "positional arguments:")), command
    assert len(description.split()) >= 6, description


# The LLM flags: one definition, the same help and default in every command that sends ----------


LLM_FLAGS = ["--base-url", "--api-key-env", "--concurrency", "--rpm", "--tpm", "--timeout"]
LLM_FLAGS += ["--max-attempts", "--prices", "--quiet"]


def _subparser(parser: argparse.ArgumentParser, words: list[str]) -> argparse.ArgumentParser:
    for word in words:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[word]
    return parser


def _llm_flags(words: list[str]) -> dict[str, tuple[object, str | None]]:
    parser = _subparser(build_parser(), words)
    by_flag = {flag: a for a in parser._actions for flag in a.option_strings}
    return {flag: (by_flag[flag].default, by_flag[flag].help) for flag in LLM_FLAGS}


def test_llm_flags_mean_one_thing_in_every_command_that_sends() -> None:
    grade = _llm_flags(["grade"])
    assert _llm_flags(["regrade"]) == grade
    for words in (["batch", "collect"], ["batch", "import"]):  # one endpoint: --base-url once
        flags = _llm_flags(words)
        assert flags.pop("--base-url")[1] == "OpenAI-compatible endpoint"
        assert flags == {k: v for k, v in grade.items() if k != "--base-url"}, words
    assert str(grade["--base-url"][1]).startswith("OpenAI-compatible endpoint; repeat it")
    assert grade["--concurrency"][0] == defaults.CONCURRENCY
    assert grade["--timeout"][0] == defaults.TIMEOUT_S
    assert grade["--max-attempts"][0] == defaults.MAX_ATTEMPTS
    # The library's own defaults are the same numbers.
    assert inspect.signature(LLMJudge).parameters["timeout"].default == defaults.TIMEOUT_S
    concurrency = inspect.signature(grade_pairs).parameters["concurrency"]
    assert concurrency.default == defaults.CONCURRENCY
    # regrade hands its live grading options (concurrency among them) on to grade_pairs.
    assert inspect.signature(regrade).parameters["grading"].kind is inspect.Parameter.VAR_KEYWORD
