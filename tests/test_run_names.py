"""One run-naming rule (grader/io/runs.py): evaluate, calibrate and regrade name runs by file stem
and tell repeated stems apart the same way; calibrate and regrade no longer refuse two runs
named alike in different folders."""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from grader.cli.main import main
from grader.errors import InputError
from grader.io.python_inputs import run_frames
from grader.io.runs import run_names
from grader.io.trec import read_qrels, read_run
from grader.metrics import evaluate, mean_scores
from tests.batch_helpers import new_prompt, seed_store
from tests.fake_batch import FakeBatchAPI
from tests.fakeserver import FakeServer


def test_the_rule() -> None:
    assert run_names(["x/bm25.txt", "y/dense.run.gz"]) == ["bm25", "dense"]
    assert run_names(["a/run.txt", "b/run.txt"]) == ["a/run", "b/run"]
    assert run_names(["r.txt", "r.txt.gz"]) == ["r.txt", "r.txt.gz"]
    assert run_names(["d/r.txt", "d/r.txt.gz"]) == ["r.txt", "r.txt.gz"]
    assert run_names(["r.txt", "r.txt"]) == ["r.txt", "r.txt'"]
    assert run_names(["-", "a/run.txt"]) == ["stdin", "run"]
    assert run_names([]) == []


def test_read_runs_keeps_both_runs_of_one_stem(tmp_path: Path) -> None:
    paths = []
    for folder, doc in (("a", "d1"), ("b", "d2")):
        (tmp_path / folder).mkdir()
        path = tmp_path / folder / "run.txt"
        path.write_text(f"q1 Q0 {doc} 1 1.0 x\n")
        paths.append(str(path))
    runs = run_frames(paths)
    assert list(runs) == ["a/run", "b/run"]
    assert runs["a/run"]["doc_id"].tolist() == ["d1"] and runs["b/run"]["doc_id"].tolist() == ["d2"]


def test_a_run_on_stdin_is_named_and_blamed_as_stdin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"q1 Q0 d1 1 2.5 x\n")))
    frame = read_run("-")
    assert frame["doc_id"].tolist() == ["d1"] and frame.attrs["path"] == "-"
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"q1 Q0 d1\n")))
    with pytest.raises(InputError, match=r"^stdin:1: ") as info:
        read_run("-")
    assert info.value.line == 1


def _two_folders(tmp_path: Path, human: list[tuple[str, str, int]]) -> list[str]:
    """runs a/sys.run (follows the human grades) and b/sys.run (the reverse order)."""
    paths = []
    for folder, sign in (("a", 1.0), ("b", -1.0)):
        (tmp_path / folder).mkdir()
        path = tmp_path / folder / "sys.run"
        path.write_text("".join(f"{q} Q0 {d} 0 {sign * g:.1f} s\n" for q, d, g in human))
        paths.append(str(path))
    return paths


def test_calibrate_takes_two_runs_of_one_stem_in_different_folders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = np.random.default_rng(4)
    human = [(f"q{q}", f"d{q}_{d}", int(rng.integers(0, 4))) for q in range(6) for d in range(8)]
    llm = [(q, d, min(3, g + int(rng.integers(0, 2)))) for q, d, g in human]
    hp, lp = tmp_path / "h.qrels", tmp_path / "l.qrels"
    hp.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in human))
    lp.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in llm))
    runs = _two_folders(tmp_path, human)
    argv = ["calibrate", "--llm", str(lp), "--human", str(hp), "--bootstrap", "0"]
    argv += ["--run", runs[0], "--run", runs[1], "-m", "P@5", "--format", "json"]
    assert main(argv) == 0
    systems = json.loads(capsys.readouterr().out)["systems"]
    by_run = {row["run"]: row for row in systems["per_system"]}
    assert set(by_run) == {"a/sys", "b/sys"}
    for name, path in zip(("a/sys", "b/sys"), runs, strict=True):
        for qrels, side in ((hp, "human"), (lp, "llm")):
            scores = mean_scores(evaluate(read_qrels(qrels), read_run(path), ["P(rel=2)@5"]))
            assert by_run[name][side] == pytest.approx(float(scores["value"].iloc[0]))
    assert by_run["a/sys"]["human"] > by_run["b/sys"]["human"]


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeBatchAPI]:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "RELGRADE_MODEL", "RELGRADE_PRICES"):
        monkeypatch.delenv(name, raising=False)
    with FakeServer() as server:
        yield FakeBatchAPI(server)


def test_regrade_takes_two_runs_of_one_stem_in_different_folders(
    api: FakeBatchAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "s.db"
    seed_store(db, 6)
    prompt = Path(new_prompt(tmp_path).source)
    runs = []
    for folder, sign in (("a", 1), ("b", -1)):
        (tmp_path / folder).mkdir()
        path = tmp_path / folder / "bm25.run"
        path.write_text("".join(f"q{i // 3} Q0 d{i} 1 {sign * i} x\n" for i in range(6)))
        runs.append(str(path))
    argv = ["regrade", "--store", str(db), "--prompt", str(prompt), "--model", "fake-model"]
    argv += ["--base-url", api.server.base_url, "--format", "json", "--quiet"]
    argv += ["--run", runs[0], "--run", runs[1], "-m", "nDCG@10"]
    assert main(argv) == 0
    deltas = json.loads(capsys.readouterr().out)["metric_deltas"]
    assert [d["run"] for d in deltas] == ["a/bm25", "b/bm25"]
    for d in deltas:
        assert d["delta"] == pytest.approx(d["new"] - d["old"])
