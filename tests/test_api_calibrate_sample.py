"""`relgrade.calibrate` and `relgrade.sample` equal their commands on examples/code-search: the
JSON of `calibrate --format json`, the report, the blind CSV and its manifest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import relgrade as rg
from grader.cli.main import main
from grader.errors import InputError, RelgradeWarning

CODE = Path(__file__).resolve().parents[1] / "examples" / "code-search"
RUNS = [CODE / "run.bm25.txt", CODE / "run.weak.txt"]


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The lexical judge's grades of both runs' top 10, as the command writes them and as the
    API returns them."""
    folder = tmp_path_factory.mktemp("code")
    out = folder / "judgments.jsonl"
    args = ["grade", "--queries", CODE / "queries.tsv", "--docs", CODE / "docs.jsonl"]
    args += ["--run", RUNS[0], "--run", RUNS[1], "--judge", "lexical", "--quiet"]
    args += ["--store", folder / "s.db", "--out", out]
    assert main([str(a) for a in args]) == 0
    frame = rg.grade(
        runs=[str(r) for r in RUNS],
        queries=CODE / "queries.tsv",
        docs=CODE / "docs.jsonl",
        judge="lexical",
        store=folder / "api.db",
        progress=False,
    )
    return {"path": out, "frame": frame, "folder": folder}


def _command_json(args: list[str], capsys: pytest.CaptureFixture[str]) -> Any:
    capsys.readouterr()
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_calibrate_to_dict_is_the_commands_json(
    judged: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["calibrate", "--llm", str(judged["path"]), "--human", str(CODE / "human.csv")]
    args += ["--run", str(RUNS[0]), "--run", str(RUNS[1]), "--format", "json"]
    command = _command_json(args, capsys)
    from_paths = rg.calibrate(judged["path"], CODE / "human.csv", runs=[str(r) for r in RUNS])
    assert from_paths.to_dict() == command
    # The same figures from what a notebook holds: the grade frame, a CSV read by pandas,
    # runs as frames under the command's names.
    runs = {"run.bm25": rg.read_run(RUNS[0]), "run.weak": rg.read_run(RUNS[1])}
    from_frames = rg.calibrate(
        judged["frame"],
        pd.read_csv(CODE / "human.csv", dtype={"query_id": str, "doc_id": str}),
        runs=runs,
    )
    mine, theirs = from_frames.to_dict(), dict(command)
    assert mine.pop("inputs") != theirs.pop("inputs")
    assert mine == theirs
    assert {"cohen_kappa", "confusion", "systems"} <= set(mine)


@pytest.mark.slow
def test_calibration_tables_and_report(judged: dict[str, Any], tmp_path: Path) -> None:
    result = rg.calibrate(judged["path"], CODE / "human.csv", runs=[str(r) for r in RUNS])
    data = result.to_dict()
    table = result.to_frame().set_index("figure")["value"]
    assert table["cohen_kappa"] == data["cohen_kappa"] and table["n"] == data["n"]
    assert table["binary_kappa@2"] == data["binary_kappa"]["2"]
    assert result.confusion.to_numpy().tolist() == data["confusion"]
    assert result.systems is not None and len(result.systems) == 2
    html = result._repr_html_()
    assert "<svg" in html and "cohen" in html.lower()
    result.save_html(tmp_path / "r.html")
    assert (tmp_path / "r.html").read_text() == html


def test_calibrate_errors_and_warnings_as_the_command(
    judged: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    llm = judged["frame"][["query_id", "doc_id"]]
    human = (
        pd.read_csv(CODE / "human.csv", dtype={"query_id": str, "doc_id": str})
        .merge(llm, on=["query_id", "doc_id"])
        .head(30)
    )
    with pytest.warns(RelgradeWarning, match="look like a sample"):
        rg.calibrate(judged["frame"], human, bootstrap=0)
    with pytest.raises(InputError, match=r"outside 0\.\.3"):
        rg.calibrate(judged["frame"], human.assign(grade=7), bootstrap=0)


def test_sample_writes_what_the_command_writes(
    judged: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cli_csv, api_csv = tmp_path / "cli.csv", tmp_path / "api.csv"
    args = ["sample", "--judgments", str(judged["path"]), "--n", "24", "--seed", "3"]
    args += ["--queries", str(CODE / "queries.tsv"), "--docs", str(CODE / "docs.jsonl")]
    assert main([*args, "--out", str(cli_csv)]) == 0
    printed = capsys.readouterr().out
    drawn = rg.sample(
        judged["path"], n=24, seed=3, queries=CODE / "queries.tsv", docs=CODE / "docs.jsonl"
    )
    manifest_path = drawn.to_csv(api_csv)
    assert api_csv.read_text() == cli_csv.read_text()
    ours = json.loads(manifest_path.read_text())
    theirs = json.loads((tmp_path / "cli.manifest.json").read_text())
    assert ours.pop("created_at") and theirs.pop("created_at")
    assert ours == theirs
    assert drawn.summary() in printed
    pairs = drawn.pairs
    on_disk = pd.read_csv(cli_csv, dtype=str)
    assert pairs.query_id.tolist() == on_disk.query_id.tolist()
    assert pairs.doc_id.tolist() == on_disk.doc_id.tolist()
    expected = {(p["query_id"], p["doc_id"]): p["inclusion_probability"] for p in theirs["pairs"]}
    got = zip(pairs.query_id, pairs.doc_id, pairs.inclusion_probability, strict=True)
    assert {(q, d): pi for q, d, pi in got} == expected


def test_sample_from_the_grade_frame_leaves_failed_pairs_out(judged: dict[str, Any]) -> None:
    frame = judged["frame"].copy()
    frame["grade"] = frame["grade"].astype("Int64")
    frame.loc[:4, ["grade", "status"]] = [pd.NA, "failed"]
    with pytest.warns(RelgradeWarning, match="no texts for the sample"):
        drawn = rg.sample(frame, fraction=0.5, strategy="uniform", seed=1)
    failed = set(zip(frame.query_id[:5], frame.doc_id[:5], strict=True))
    assert not failed & set(zip(drawn.pairs.query_id, drawn.pairs.doc_id, strict=True))
    assert drawn.manifest.excluded["failed"] == 5
    assert (drawn.pairs["query"] == "").all()  # no texts given: ids only, as the command
