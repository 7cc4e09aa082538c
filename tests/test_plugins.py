"""Plug points: a toy judge and a toy measure added through docs/adding-a-judge.md and
docs/adding-a-measure.md only (tests/plugins/), then used from the command line.

The toy judge grades a document by its length (min(3, characters // 10)); the toy measure is
rank-biased precision, ToyRBP(rel=N,p=P)@k = (1 - p) * sum_{i <= k} p^(i-1) [rel_i >= N].
Expected values below are worked out by hand from those definitions.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tests.plugins.toy_judge  # step 5: importing the module registers the judge
import tests.plugins.toy_measure  # noqa: F401  (registers the measure)
from grader.cli.main import main
from grader.io.trec import read_qrels
from grader.metrics.measures import parse_measure
from tests.plugins.toy_measure import rbp

ROOT = Path(__file__).resolve().parents[1]

# Texts of 5, 15, 25 and 45 characters: grades 0, 1, 2 and 3.
TEXTS = {"d1": "short", "d2": "fifteen chars!!", "d3": "twenty-five characters...", "d4": "x" * 45}


@pytest.fixture
def grade_files(tmp_path: Path) -> list[str]:
    (tmp_path / "queries.tsv").write_text("q1\tcache eviction policy\n")
    docs = "".join(json.dumps({"doc_id": d, "text": t}) + "\n" for d, t in TEXTS.items())
    (tmp_path / "docs.jsonl").write_text(docs)
    run = "".join(f"q1 Q0 {d} {r} {10 - r} bm25\n" for r, d in enumerate(TEXTS, 1))
    (tmp_path / "run.txt").write_text(run)
    names = {"--queries": "queries.tsv", "--docs": "docs.jsonl", "--run": "run.txt"}
    return [word for flag, name in names.items() for word in (flag, str(tmp_path / name))]


def _grades(qrels: Path) -> dict[str, int]:
    frame = read_qrels(qrels)
    return {str(d): int(g) for d, g in zip(frame["doc_id"], frame["grade"], strict=True)}


def test_grade_with_the_toy_judge_offline(
    grade_files: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # offline: no key needed
    qrels, store = tmp_path / "toy.qrels", str(tmp_path / "s.db")
    argv = ["grade", *grade_files, "--judge", "toylen", "--store", store, "--quiet"]
    assert main([*argv, "--qrels-out", str(qrels)]) == 0
    assert _grades(qrels) == {"d1": 0, "d2": 1, "d3": 2, "d4": 3}


def test_a_rerun_of_the_toy_judge_is_all_cached(
    grade_files: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["grade", *grade_files, "--judge", "toylen", "--store", str(tmp_path / "s.db")]
    assert main([*argv, "--quiet"]) == 0
    capsys.readouterr()
    assert main(argv) == 0
    assert "graded 0, cached 4, failed 0" in capsys.readouterr().err


def test_regrade_with_the_toy_judge(grade_files: list[str], tmp_path: Path) -> None:
    store, qrels = str(tmp_path / "s.db"), tmp_path / "new.qrels"
    assert main(["grade", *grade_files, "--judge", "lexical", "--store", store, "--quiet"]) == 0
    argv = ["regrade", "--store", store, "--judge", "toylen"]  # an offline judge needs no prompt
    assert main([*argv, "--qrels-out", str(qrels), "--quiet", "--format", "json"]) == 0
    assert _grades(qrels) == {"d1": 0, "d2": 1, "d3": 2, "d4": 3}


def test_the_judge_flags_list_the_registry(capsys: pytest.CaptureFixture[str]) -> None:
    for command in (["grade"], ["regrade"], ["batch", "export"]):
        with pytest.raises(SystemExit):
            main([*command, "--help"])
        text = capsys.readouterr().out
        assert "llm" in text
        # the Batch API sends LLM requests: batch export lists only judges registered batch=True
        assert ("toylen" in text) == (command != ["batch", "export"])


def test_the_toy_judge_takes_no_model(grade_files: list[str], tmp_path: Path) -> None:
    argv = ["grade", *grade_files, "--judge", "toylen", "--model", "m", "--store"]
    assert main([*argv, str(tmp_path / "s.db")]) == 2
    assert not (tmp_path / "s.db").exists()


@pytest.fixture
def eval_files(tmp_path: Path) -> list[str]:
    (tmp_path / "qrels.txt").write_text("q1 0 a 3\nq1 0 b 0\nq1 0 c 2\nq1 0 d 1\nq2 0 z 2\n")
    # q1 ranks a, b, c, x (unjudged), d; q2 is not answered (scores 0, counted in the mean).
    run = "".join(f"q1 Q0 {d} {r} {10 - r} t\n" for r, d in enumerate("abcxd", 1))
    (tmp_path / "run.txt").write_text(run)
    return [str(tmp_path / "qrels.txt"), str(tmp_path / "run.txt")]


def test_evaluate_with_the_toy_measure(
    eval_files: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    measures = ["ToyRBP(p=0.5)@5", "ToyRBP(p=0.5)@2", "ToyRBP@5"]
    assert main(["evaluate", *eval_files, "-m", *measures, "--per-query", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    got = {(r["query_id"], r["measure"]): r["value"] for r in rows}
    # q1's relevant (grade >= 2) results are at ranks 1 and 3.
    expected = {
        ("q1", "ToyRBP(rel=2,p=0.5)@5"): 0.5 * (1 + 0.25),
        ("q1", "ToyRBP(rel=2,p=0.5)@2"): 0.5 * 1,
        ("q1", "ToyRBP(rel=2,p=0.8)@5"): 0.2 * (1 + 0.64),
        ("q2", "ToyRBP(rel=2,p=0.5)@5"): 0.0,
        ("all", "ToyRBP(rel=2,p=0.5)@5"): 0.625 / 2,
        ("all", "ToyRBP(rel=2,p=0.5)@2"): 0.5 / 2,
        ("all", "ToyRBP(rel=2,p=0.8)@5"): 0.328 / 2,
    }
    assert {k: got[k] for k in expected} == pytest.approx(expected, abs=1e-12)


def test_the_list_function_agrees_with_the_hand_value() -> None:
    assert rbp([3, 0, 2, None, 1], p=0.5, k=5, threshold=2) == pytest.approx(0.625, abs=1e-12)
    assert rbp([], p=0.5) == 0.0


def test_the_toy_measure_parses_and_prints_back() -> None:
    measure = parse_measure("toyrbp(p=0.5,rel=3)@10")
    assert str(measure) == "ToyRBP(rel=3,p=0.5)@10"
    assert parse_measure(str(measure)) == measure


def test_a_bad_parameter_is_an_input_error(
    eval_files: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["evaluate", *eval_files, "-m", "ToyRBP(p=1.5)@5"]) == 2
    assert "p=1.5: p is a probability strictly between 0 and 1" in capsys.readouterr().err


def test_evaluate_help_lists_the_toy_measure(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["evaluate", "--help"])
    text = capsys.readouterr().out
    assert "  ToyRBP(rel=N,p=P)[@k]\n" + " " * 20 + "toy: rank-biased precision" in text


TOY_ENTRY_POINTS = (
    "[relgrade.judges]\ntoylen = tests.plugins.toy_judge\n\n"
    "[relgrade.measures]\ntoyrbp = tests.plugins.toy_measure\n"
)


def _installed(tmp_path: Path, entry_points: str = TOY_ENTRY_POINTS) -> Path:
    """A folder holding the metadata of an installed package `toyplug` whose entry points name
    the toy judge and the toy measure (as `pip install` writes it)."""
    info = tmp_path / "toyplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toyplug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)
    return tmp_path


LOADS = """
import sys
from grader.cli.main import main
from grader.errors import InputError
from grader.metrics.measures import parse_measure
try:
    print(parse_measure('ToyRBP@3'))
except InputError as error:
    print(error.reason)
try:
    main(['grade', '--help'])
except SystemExit:
    pass
print('loaded:', sorted(m for m in sys.modules if m.startswith('tests.plugins.')))
"""


def _run_installed(tmp_path: Path, switch: str | None, code: str = LOADS) -> str:
    """stdout of `code` in a fresh interpreter with the toy package installed on its path and
    RELGRADE_LOAD_PLUGINS set to `switch` (None: unset, the default of an ordinary user)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(_installed(tmp_path)), str(ROOT)])}
    env.pop("RELGRADE_LOAD_PLUGINS")  # the suite turns plug-ins off (tests/conftest.py)
    if switch is not None:
        env["RELGRADE_LOAD_PLUGINS"] = switch
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout


@pytest.mark.slow
@pytest.mark.parametrize("switch", [None, "1"])
def test_entry_points_register_an_installed_plugin(tmp_path: Path, switch: str | None) -> None:
    """Step 4 for an installed package: the entry point groups, read from real package
    metadata (a dist-info folder on the path), in a fresh interpreter."""
    out = _run_installed(tmp_path, switch).splitlines()
    assert out[0] == "ToyRBP(rel=2,p=0.8)@3"
    assert any("{llm,lexical,toylen}" in line for line in out)
    assert out[-1] == "loaded: ['tests.plugins.toy_judge', 'tests.plugins.toy_measure']"


@pytest.mark.slow
@pytest.mark.parametrize("switch", ["0", "", "off"])
def test_the_switch_turns_installed_plugins_off(tmp_path: Path, switch: str) -> None:
    out = _run_installed(tmp_path, switch).splitlines()
    assert out[0] == "measure 'ToyRBP@3': unknown measure 'ToyRBP'"
    assert any("{llm,lexical}" in line for line in out)
    assert out[-1] == "loaded: []"


@pytest.mark.slow
def test_a_plugin_author_checks_the_installed_package(tmp_path: Path) -> None:
    """relgrade.testing on the installed toy package, as its author's test would run it."""
    code = (
        "from relgrade.testing import check_judge, check_measure\n"
        "check_measure('toyrbp')\ncheck_judge('toylen')\nprint('conforms')\n"
    )
    assert _run_installed(tmp_path, "1", code) == "conforms\n"


@pytest.mark.slow
def test_a_plugin_that_fails_to_load_is_named(tmp_path: Path) -> None:
    broken = "[relgrade.measures]\nbroken = toyplug_missing.measure\n"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(_installed(tmp_path, broken)), str(ROOT)]),
    }
    env["RELGRADE_LOAD_PLUGINS"] = "1"
    (tmp_path / "qrels.txt").write_text("q1 0 a 3\n")
    (tmp_path / "run.txt").write_text("q1 Q0 a 1 1.0 t\n")
    argv = [str(tmp_path / "qrels.txt"), str(tmp_path / "run.txt"), "-m", "Nope@3"]
    code = f"from grader.cli.main import main\nraise SystemExit(main(['evaluate', *{argv!r}]))"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 2, done.stderr
    assert "plug-in 'broken' (toyplug_missing.measure) of toyplug" in done.stderr
    assert "ModuleNotFoundError" in done.stderr and "RELGRADE_LOAD_PLUGINS=0" in done.stderr


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--judge", "toylen", "--batch"], "--batch sends LLM requests: judge 'toylen' makes none"),
        (["--judge", "toylen", "--dry-run"], "judge 'toylen' sends none"),
        (["--judge", "lexical"], "judge 'lexical' reads every document of the collection"),
    ],
)
def test_regrade_refuses_what_a_judge_cannot_do(
    grade_files: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    says: str,
) -> None:
    store = str(tmp_path / "s.db")
    assert main(["grade", *grade_files, "--judge", "toylen", "--store", store, "--quiet"]) == 0
    capsys.readouterr()
    assert main(["regrade", "--store", store, *extra]) == 2
    assert says in capsys.readouterr().err


def test_the_library_builds_registered_judges_and_refuses_twins() -> None:
    from grader.errors import InputError
    from grader.judges.registry import JudgeSettings, build_judges, register_judge
    from grader.metrics.registry import register
    from tests.plugins.toy_judge import LengthJudge, make_length_judge
    from tests.plugins.toy_measure import compute

    (judge,) = build_judges("toylen", JudgeSettings())
    assert isinstance(judge, LengthJudge) and judge.judge_id == "toylen"
    with pytest.raises(InputError, match="takes no model"):
        build_judges("toylen", JudgeSettings(), ["gpt-4o-mini"])
    with pytest.raises(InputError, match="no judge named 'nope'"):
        build_judges("nope", JudgeSettings())
    with pytest.raises(ValueError, match="registered already"):
        register_judge("toylen", make_length_judge, help="twice")
    with pytest.raises(ValueError, match="map is registered already"):
        register("MyAP", compute, usage="MyAP", help="clashes with AP's spelling", aliases=("map",))
