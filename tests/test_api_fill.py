"""`relgrade.evaluate(qrels, runs, fill=LLM)` equals `relgrade evaluate QRELS RUN ... --fill LLM
--format json` record for record (paths and DataFrames, per query too, the shares and the
interval), on a small collection and on TREC DL 2019 with 40% of its qrels removed; the also-
judged manifest weights it as the command does; the same warnings and errors."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import relgrade as rg
from grader.cli.main import main
from grader.errors import InputError, RelgradeWarning
from grader.io.trec import read_qrels, read_run
from tests.grade_data import GradeFiles, write_grade_files
from tests.helpers import fill_data as fd
from tests.helpers.fill_world import MEASURES, fill_world

Record = dict[str, Any]


def _command(capsys: pytest.CaptureFixture[str], argv: list[str]) -> tuple[list[Record], str]:
    capsys.readouterr()
    assert main([*argv, "--format", "json"]) == 0, capsys.readouterr().err
    captured = capsys.readouterr()
    records: list[Record] = json.loads(captured.out)
    return records, captured.err


def _records(frame: pd.DataFrame) -> list[Record]:
    """The frame's rows as the JSON's records: keys without a value left out, NaN as null."""
    out = []
    for row in frame.to_dict(orient="records"):
        record = {str(k): v for k, v in row.items() if not (k != "value" and _absent(v))}
        record["value"] = None if _absent(row["value"]) else row["value"]
        out.append(record)
    return out


def _absent(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _frames(world: dict[str, Any]) -> dict[str, Any]:
    paths = world["paths"]
    return {
        "human": read_qrels(paths["human"]).rename(columns={"grade": "relevance"}),
        "llm": read_qrels(paths["llm"]),
        "runs": {p.stem: read_run(p)[["query_id", "doc_id", "score"]] for p in world["runs"]},
    }


@pytest.mark.slow
@pytest.mark.parametrize("per_query", [False, True])
def test_paths_and_frames_equal_the_commands_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], per_query: bool
) -> None:
    world = fill_world(tmp_path)
    paths, runs = world["paths"], [str(r) for r in world["runs"]]
    argv = ["evaluate", str(paths["human"]), *runs, "--fill", str(paths["llm"]), "-m", *MEASURES]
    expected, err = _command(capsys, argv + (["--per-query"] if per_query else []))
    assert any("ci_low" in r for r in expected) and any(r.get("source") for r in expected)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        by_path = rg.evaluate(paths["human"], runs, MEASURES, per_query, fill=paths["llm"])
    assert _records(by_path) == expected
    said = [str(w.message) for w in caught if issubclass(w.category, RelgradeWarning)]
    assert said + by_path.attrs["notes"] == err.splitlines()
    frames = _frames(world)
    by_frame = rg.evaluate(frames["human"], frames["runs"], MEASURES, per_query, fill=frames["llm"])
    assert _records(by_frame) == expected
    nested: dict[str, dict[str, int]] = {}
    for (q, d), g in world["llm"].items():
        nested.setdefault(q, {})[d] = g
    by_dict = rg.evaluate(frames["human"], frames["runs"], MEASURES, per_query, fill=nested)
    assert _records(by_dict) == expected


def test_default_measures_scale_and_threshold_warning_as_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = fill_world(tmp_path)
    binary = tmp_path / "binary.qrels"
    binary.write_text("".join(f"{q} 0 {d} {min(g, 1)}\n" for (q, d), g in world["human"].items()))
    run, llm = str(world["runs"][1]), str(world["paths"]["llm"])
    argv = ["evaluate", str(binary), run, "--fill", llm, "--llm-scale", "0:0,1:0,2:1,3:1"]
    expected, err = _command(capsys, argv)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        frame = rg.evaluate(binary, run, fill=llm, llm_scale={0: 0, 1: 0, 2: 1, 3: 1})
    assert _records(frame) == expected
    said = [str(w.message) for w in caught if issubclass(w.category, RelgradeWarning)]
    assert said and said[0].startswith("binary qrels (highest grade 1)")
    assert said + frame.attrs["notes"] == err.splitlines()


def test_the_also_judged_manifest_weights_the_overlap_as_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files: GradeFiles = write_grade_files(tmp_path, n_queries=4, depth=6)
    human = tmp_path / "human.qrels"
    human.write_text(
        "".join(f"q{q} 0 d{q * 6 + r} {(q + r) % 5}\n" for q in range(4) for r in (0, 2, 4))
    )
    out = tmp_path / "j.jsonl"
    args = files.args(
        "--judge", "lexical", "--store", tmp_path / "s.db", "--quiet", "--skip-judged", human,
        "--out", out, "--also-judged", "6", "--stratify",
    )  # fmt: skip
    assert main(args) == 0
    argv = ["evaluate", str(human), str(files.run), "--fill", str(out), "-m", "P(rel=2)@5"]
    expected, err = _command(capsys, argv)
    frame = rg.evaluate(human, files.run, ["P(rel=2)@5"], fill=out)
    assert _records(frame) == expected
    manifest = tmp_path / "j.manifest.json"
    assert frame.attrs["notes"] == err.splitlines()
    assert f"weighted by 1/pi from {manifest}" in err
    # The judgments as a frame: no path to look beside, so the manifest is given.
    judgments = pd.read_json(out, lines=True, dtype={"query_id": str, "doc_id": str})
    given = rg.evaluate(human, files.run, ["P(rel=2)@5"], fill=judgments, fill_manifest=manifest)
    assert _records(given) == expected
    unweighted = rg.evaluate(human, files.run, ["P(rel=2)@5"], fill=judgments)
    assert "weighted by 1/pi" not in "\n".join(unweighted.attrs["notes"])


def test_errors_are_the_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    world = fill_world(tmp_path)
    human, run = world["paths"]["human"], str(world["runs"][0])
    other = tmp_path / "other.qrels"
    other.write_text("x1 0 a 1\nx2 0 b 2\n")
    assert main(["evaluate", str(human), run, "--fill", str(other)]) == 2
    command = capsys.readouterr().err
    with pytest.raises(InputError) as raised:
        rg.evaluate(human, run, fill=other)
    assert str(raised.value) in command and "share no query id" in str(raised.value)
    twice = tmp_path / "twice.qrels"
    twice.write_text(human.read_text() + human.read_text().splitlines(keepends=True)[0])
    assert main(["evaluate", str(twice), run, "--fill", str(world["paths"]["llm"])]) == 2
    command = capsys.readouterr().err
    with pytest.raises(InputError) as raised:
        rg.evaluate(twice, run, fill=world["paths"]["llm"])
    assert str(raised.value) in command and "twice" in str(raised.value)
    frame = read_qrels(human)
    with pytest.raises(InputError, match="twice, in rows 0 and"):
        rg.evaluate(pd.concat([frame, frame.iloc[:1]]), run, fill=world["paths"]["llm"])
    with pytest.raises(InputError, match="llm_scale= and fill_manifest= go with fill="):
        rg.evaluate(human, run, llm_scale="0:0,1:1,2:2,3:3")
    with pytest.raises(InputError, match="no mapping for LLM grade"):
        rg.evaluate(human, run, fill=world["paths"]["llm"], llm_scale={0: 0, 1: 1})


@pytest.mark.slow
@pytest.mark.skipif(not fd.DATA.is_dir(), reason="TREC DL 2019 data absent")
def test_dl2019_with_holes_equals_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    holed = fd.drop_share(fd.human_qrels(), 0.4, seed=0)
    human = fd.write_qrels(tmp_path / "human.qrels", holed.kept)
    llm = fd.write_qrels(tmp_path / "llm.qrels", fd.label_set())
    runs = {name: run for name, run in list(fd.dl2019_runs().items())[:3]}
    paths = [str(fd.write_run(tmp_path / f"{name}.run", run, name)) for name, run in runs.items()]
    measures = ["nDCG@10", "P(rel=2)@10", "RR(rel=2)@10"]
    argv = ["evaluate", str(human), *paths, "--fill", str(llm), "-m", *measures, "--per-query"]
    expected, _ = _command(capsys, argv)
    assert any("ci_low" in r for r in expected)
    assert _records(rg.evaluate(human, paths, measures, True, fill=llm)) == expected
    frames = rg.evaluate(holed.kept, runs, measures, True, fill=fd.label_set())
    assert _records(frames) == expected
