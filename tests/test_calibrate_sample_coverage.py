"""`calibrate` says so when human grades look like a sample but no manifest weights them, and
when some sampled pairs were never graded."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from grader.cli.main import main
from tests.helpers.judgments import write_judgments
from tests.helpers.sampling import population


def _sample(tmp_path: Path) -> tuple[Path, Path]:
    """A stratified sample of 12 of 76 judgments, filled in; returns (judgments, filled)."""
    judgments = tmp_path / "j.jsonl"
    write_judgments(judgments, population({0: 40, 1: 20, 2: 10, 3: 6}, queries=4))
    out = tmp_path / "sample.csv"
    argv = ["sample", "--judgments", str(judgments), "--n", "12", "--strategy", "stratified"]
    assert main([*argv, "--seed", "4", "--out", str(out)]) == 0
    with out.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    for i, row in enumerate(rows):
        row["grade"] = str(i % 4)
    filled = tmp_path / "filled.csv"
    with filled.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return judgments, filled


def _calibrate(
    judgments: Path, human: Path, capsys: pytest.CaptureFixture[str], *extra: str
) -> tuple[dict[str, object], str]:
    capsys.readouterr()
    argv = ["calibrate", "--llm", str(judgments), "--human", str(human), "--format", "json"]
    assert main([*argv, "--bootstrap", "0", *extra]) == 0
    said = capsys.readouterr()
    return json.loads(said.out), said.err


def test_a_sample_without_its_manifest_is_flagged_loudly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    judgments, filled = _sample(tmp_path)
    human = tmp_path / "human.csv"
    argv = ["sample", "--import", str(filled), "--manifest", str(tmp_path / "sample.manifest.json")]
    assert main([*argv, "--out", str(human)]) == 0

    report, err = _calibrate(judgments, human, capsys)  # manifest beside: weighted, no warning
    assert report["manifest"] and "look like a sample" not in err

    (tmp_path / "human.manifest.json").unlink()
    report, err = _calibrate(judgments, human, capsys)
    assert report["manifest"] is None
    said = " ".join(err.split())
    assert "warning: the human grades look like a sample (12 of the 76 LLM-graded pairs" in said
    assert "no sample manifest was found beside" in said and "(human.manifest.json)" in said
    assert "UNWEIGHTED" in said and "--manifest SAMPLE.manifest.json" in said
    warnings = report["warnings"]
    assert isinstance(warnings, list) and any("look like a sample" in w for w in warnings)

    _, err = _calibrate(judgments, human, capsys, "--no-manifest")
    assert "look like a sample" not in err


def test_grades_of_every_pair_or_of_other_pairs_are_not_a_sample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    judgments = tmp_path / "j.jsonl"
    pop = population({0: 6, 1: 2, 2: 1, 3: 1}, queries=2)
    write_judgments(judgments, pop)
    everything = tmp_path / "all.csv"
    everything.write_text(
        "query_id,doc_id,grade\n" + "".join(f"{j.query_id},{j.doc_id},1\n" for j in pop)
    )
    _, err = _calibrate(judgments, everything, capsys)
    assert "look like a sample" not in err
    other = tmp_path / "other.csv"
    first = pop[0]
    other.write_text(f"query_id,doc_id,grade\n{first.query_id},{first.doc_id},1\nqx,dx,2\n")
    _, err = _calibrate(judgments, other, capsys)
    assert "look like a sample" not in err


def test_sampled_pairs_never_graded_are_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    judgments, filled = _sample(tmp_path)
    text = filled.read_text().splitlines()
    header, rows = text[0], text[1:]
    cut = [r.rsplit(",", 2)[0] + ",," for r in rows[:4]]  # four rows left without a grade
    filled.write_text("\n".join([header, *cut, *rows[4:]]) + "\n")
    human = tmp_path / "human.csv"
    argv = ["sample", "--import", str(filled), "--manifest", str(tmp_path / "sample.manifest.json")]
    capsys.readouterr()
    assert main([*argv, "--out", str(human), "--allow-missing"]) == 0
    assert "graded 8, missing 4 of the 12 sampled pairs" in capsys.readouterr().out
    report, err = _calibrate(judgments, human, capsys)
    assert report["n"] == 8
    said = " ".join(err.split())
    assert "warning: 4 of the 12 sampled pairs in the manifest were never graded" in said
    assert "rest on the 8 graded ones" in said
