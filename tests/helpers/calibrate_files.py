"""Grade files written from rows, and calibrate run for its JSON: what the calibrate tests share."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from grader.cli.main import main

Rows = list[tuple[str, str, int]]
"""(query_id, doc_id, grade) rows."""


def write_qrels_rows(path: Path, rows: Rows) -> Path:
    path.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in rows))
    return path


def write_grades_csv(path: Path, rows: Rows) -> Path:
    path.write_text("query_id,doc_id,grade\n" + "".join(f"{q},{d},{g}\n" for q, d, g in rows))
    return path


def calibrate_json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> dict[str, Any]:
    assert main(["calibrate", *argv, "--format", "json"]) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    return out


def noisy_grades(seed: int, n_queries: int = 12, per_query: int = 15) -> tuple[Rows, Rows]:
    """(human, LLM) rows of per_query docs in each of n_queries queries; the LLM grades about
    one point above people, at times one below."""
    rng = np.random.default_rng(seed)
    human: Rows = []
    llm: Rows = []
    for q in range(n_queries):
        for d in range(per_query):
            h = int(rng.integers(0, 4))
            m = int(np.clip(h + rng.integers(0, 3) - (1 if rng.random() < 0.3 else 0), 0, 3))
            human.append((f"q{q}", f"d{q}_{d}", h))
            llm.append((f"q{q}", f"d{q}_{d}", m))
    return human, llm


def noisy_runs(folder: Path, human: Rows, noises: list[float]) -> list[str]:
    """Runs that rank each query's docs by the human grade plus noise: better runs, less noise."""
    rng = np.random.default_rng(0)
    paths = []
    for i, noise in enumerate(noises):
        path = folder / f"sys{i}.run"
        path.write_text(
            "".join(f"{q} Q0 {d} 0 {g + rng.normal(0, noise):.6f} sys{i}\n" for q, d, g in human)
        )
        paths.append(str(path))
    return paths
