"""The import-linter contracts in pyproject.toml hold on the real tree and break on a bad import.

Each breaking case copies grader/, calibration/, relgrade/ and pyproject.toml to a temporary
directory, adds one import that a layer rule forbids, and runs `lint-imports` there: it must exit
non-zero, report the contracts that import breaks as BROKEN and every other contract as KEPT.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")

LAYERS = "grader layers: the CLI on top, errors at the bottom"
NO_CALIBRATION = "grader never imports calibration (only grader.cli ties them together)"
CALIBRATION_LAYERS = "calibration layers: entry points on top, statistics below"
CALIBRATION_FROM_GRADER = "calibration reads grader's files and metrics; never grades or stores"
JUDGES_INDEPENDENT = "each judge stands alone: lexical and LLM never import each other"
METRICS_PURE = "metrics imports nothing of the project but grader.errors"
BATCH = "grader.batch: api and files never import each other"
NO_CLI = "relgrade never imports grader.cli (the API is thin over the library)"
ARGPARSE = "the library never imports argparse outside grader.cli"
ALL_CONTRACTS = (
    LAYERS,
    NO_CALIBRATION,
    CALIBRATION_LAYERS,
    CALIBRATION_FROM_GRADER,
    JUDGES_INDEPENDENT,
    METRICS_PURE,
    BATCH,
    NO_CLI,
    ARGPARSE,
)


def _lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """Run lint-imports on the tree at `root` with the pyproject.toml found there."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _copy_tree(dest: Path) -> None:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "static")
    for package in ("grader", "calibration", "relgrade"):
        shutil.copytree(ROOT / package, dest / package, ignore=ignore)
    shutil.copy2(ROOT / "pyproject.toml", dest / "pyproject.toml")


def test_the_real_tree_keeps_every_contract() -> None:
    result = _lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    for name in ALL_CONTRACTS:
        assert f"{name} KEPT" in result.stdout
    assert "0 broken" in result.stdout


def _slow(module: str, line: str, broken: set[str]) -> Any:
    """A case run by the whole suite only (each runs lint-imports on a copy of the tree)."""
    return pytest.param(module, line, broken, marks=pytest.mark.slow)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # metrics is pure: calibration also breaks the rule that grader never imports it
        (
            "grader/metrics/ndcg.py",
            "import calibration.stats.confseq",
            {METRICS_PURE, NO_CALIBRATION},
        ),
        # metrics and models are independent siblings of the bottom layer
        _slow("grader/metrics/ndcg.py", "import grader.models", {METRICS_PURE, LAYERS}),
        _slow("grader/grading/pairs.py", "import calibration.stats.agreement", {NO_CALIBRATION}),
        # an import upwards: a reader that reaches into the store
        # (calibration reads files through grader.io, so its contract breaks too)
        _slow(
            "grader/io/files.py",
            "import grader.store.store",
            {LAYERS, CALIBRATION_FROM_GRADER},
        ),
        # grading and batch share a layer and stay independent
        _slow("grader/grading/budget.py", "import grader.batch.requests", {LAYERS}),
        # (relgrade imports calibration's summary: it would reach grader.cli through it)
        _slow(
            "calibration/summary.py",
            "import grader.cli.main",
            {CALIBRATION_FROM_GRADER, NO_CLI},
        ),
        # calibration may read grader's files but never reach its store
        ("calibration/stats/bias.py", "import grader.store.store", {CALIBRATION_FROM_GRADER}),
        # statistics know nothing of spot-check files
        _slow(
            "calibration/stats/ppi.py",
            "import calibration.spotcheck.manifest",
            {CALIBRATION_LAYERS},
        ),
        _slow(
            "grader/judges/lexical/judge.py",
            "import grader.judges.llm.judge",
            {JUDGES_INDEPENDENT, CALIBRATION_FROM_GRADER},
        ),
        # the Batch API and batch files stay apart
        _slow("grader/batch/files/exports.py", "import grader.batch.api.state", {BATCH}),
        # the API is thin over the library, and only the command line parses flags
        ("relgrade/_grade.py", "import grader.cli.grade", {NO_CLI}),
        _slow("grader/job/options.py", "import argparse", {ARGPARSE}),
        # a new top-level module must be given a layer (the layers contract is exhaustive)
        ("grader/unplaced.py", "import grader.errors", {LAYERS}),
    ],
)
def test_a_forbidden_import_breaks_its_contract(
    tmp_path: Path, module: str, line: str, broken: set[str]
) -> None:
    _copy_tree(tmp_path)
    target = tmp_path / module
    before = target.read_text(encoding="utf-8") if target.exists() else ""
    target.write_text(f"{before}\n{line}\n", encoding="utf-8")

    result = _lint_imports(tmp_path)

    assert result.returncode != 0, result.stdout + result.stderr
    for name in ALL_CONTRACTS:
        verdict = "BROKEN" if name in broken else "KEPT"
        assert f"{name} {verdict}" in result.stdout, result.stdout + result.stderr
