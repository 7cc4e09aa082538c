"""Every example in relgrade's docstrings runs and prints what it shows (doctest)."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

MODULES = ["relgrade", "relgrade._evaluate", "relgrade._grade", "relgrade._calibrate"]
MODULES += ["relgrade._sample", "relgrade.pyterrier"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if name == "relgrade.pyterrier":
        pytest.importorskip("pyterrier")
    monkeypatch.chdir(tmp_path)  # the examples' stores are written here
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
