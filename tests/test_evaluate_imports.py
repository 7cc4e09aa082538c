"""`relgrade evaluate` of TREC files loads only what it needs (issue 12, goal 5): fresh processes.

Which modules a command imports is what decides how fast a small run is evaluated: pandas,
pydantic, the openai SDK, tenacity, matplotlib, scipy and scikit-learn are never needed to score
TREC files (rich only for the table). A path that does need pandas later (a grades CSV, a run
with irregular whitespace read whole) must still work after evaluate kept pyarrow from importing
pandas on its own: its numbers are checked against the library's here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader.io.trec import read_qrels, read_run
from grader.metrics import evaluate, mean_scores

ROOT = Path(__file__).resolve().parents[1]
NEVER = ["pandas", "pydantic", "openai", "tenacity", "matplotlib", "scipy", "sklearn", "httpx"]
QRELS = "q1 0 a 3\nq1 0 b 1\nq1 0 c 2\nq2 0 x 2\nq2 0 y 0\nq3 0 z 1\n"
RUN = "q1 Q0 b 1 3.0 r\nq1 Q0 a 2 3.0 r\nq1 Q0 d 3 1.0 r\nq2 Q0 y 1 2.5 r\nq2 Q0 x 2 2.0 r\n"
MEASURES = ["nDCG@10", "RR(rel=2)", "P(rel=1)@2", "AP(rel=2)"]


def _evaluate_in_child(argv: list[str]) -> tuple[str, list[str]]:
    """stdout of `relgrade evaluate ARGV` run in a fresh interpreter, and the NEVER modules it
    loaded."""
    code = (
        "import json, sys\n"
        "from grader.cli.main import main\n"
        f"code = main({argv!r})\n"
        f"loaded = [m for m in {[*NEVER, 'rich']!r} if m in sys.modules]\n"
        "print(json.dumps({'code': code, 'loaded': loaded}), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    assert report["code"] == 0, done.stderr
    return done.stdout, report["loaded"]


def _means(qrels: Path, run: Path) -> dict[str, float]:
    frame = evaluate(read_qrels(qrels, any_grade=True), read_run(run), MEASURES)
    return {m: v for m, v in mean_scores(frame).itertuples(index=False)}


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "qrels.txt").write_text(QRELS)
    (tmp_path / "run.txt").write_text(RUN)
    return tmp_path / "qrels.txt", tmp_path / "run.txt"


def test_json_from_trec_files_loads_none_of_the_heavy_modules(files: tuple[Path, Path]) -> None:
    qrels, run = files
    out, loaded = _evaluate_in_child(
        ["evaluate", str(qrels), str(run), "-m", *MEASURES, "--format", "json"]
    )
    assert loaded == []  # not even rich: JSON needs no table
    means = {r["measure"]: r["value"] for r in json.loads(out)}
    assert means == pytest.approx(_means(qrels, run), rel=0, abs=0)


@pytest.mark.slow
def test_the_table_loads_rich_and_nothing_else_heavy(files: tuple[Path, Path]) -> None:
    qrels, run = files
    out, loaded = _evaluate_in_child(["evaluate", str(qrels), str(run)])
    assert loaded == ["rich"]
    assert "mean over queries" in out and "nDCG@10" in out


@pytest.mark.slow
def test_paths_that_need_pandas_still_import_it_and_agree(tmp_path: Path) -> None:
    """A grades CSV and a run with irregular whitespace (read whole, into a DataFrame)."""
    csv = tmp_path / "grades.csv"
    rows = [line.split() for line in QRELS.splitlines()]
    csv.write_text("query_id,doc_id,grade\n" + "".join(f"{q},{d},{g}\n" for q, _, d, g in rows))
    irregular = tmp_path / "run.txt"
    irregular.write_text(RUN.replace(" Q0 ", "  Q0\t"))
    qrels = tmp_path / "qrels.txt"
    qrels.write_text(QRELS)
    out, loaded = _evaluate_in_child(
        ["evaluate", str(csv), str(irregular), "-m", *MEASURES, "--format", "json"]
    )
    assert "pandas" in loaded
    means = {r["measure"]: r["value"] for r in json.loads(out)}
    assert means == pytest.approx(_means(qrels, irregular), rel=0, abs=0)


def test_help_loads_no_numeric_library() -> None:
    code = (
        "import sys\n"
        "from grader.cli.main import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print([m for m in ('numpy', 'pyarrow', 'pandas', 'rich') if m in sys.modules])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "[]"
