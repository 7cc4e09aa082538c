"""An active sample with its judgments on disk, for the live-stopping tests of the grading page."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from calibration.spotcheck.annotate.gradelog import GradeLog, grade_log_path
from calibration.spotcheck.annotate.server import AnnotateServer
from calibration.spotcheck.blind import neutral_scale, read_blind_csv
from calibration.spotcheck.manifest import read_manifest
from calibration.spotcheck.stopping import DrawOrder, LiveStopping
from grader.cli.main import main
from grader.io.grades import read_llm_grades
from tests.helpers.judgments import write_judgments
from tests.helpers.sampling import population


def active_sample(folder: Path, n: int = 120) -> tuple[Path, Path, dict[tuple[str, str], int]]:
    """sample.csv (active, n pairs) drawn from j.jsonl; returns both paths and the LLM grades."""
    pop = population({0: 150, 1: 80, 2: 50, 3: 40}, queries=12, with_distribution=True)
    judgments = folder / "j.jsonl"
    write_judgments(judgments, pop)
    sample = folder / "sample.csv"
    argv = ["sample", "--judgments", str(judgments), "--n", str(n), "--strategy", "active"]
    assert main([*argv, "--seed", "2", "--out", str(sample)]) == 0
    return sample, judgments, {(j.query_id, j.doc_id): int(j.grade or 0) for j in pop}


def live_server(sample: Path, judgments: Path, target: float) -> AnnotateServer:
    """A grading server for `ann` with live figures, as `relgrade annotate` builds it."""
    items = read_blind_csv(sample)
    manifest = read_manifest(sample.with_name("sample.manifest.json"))
    order = DrawOrder.from_manifest(manifest)
    assert order is not None
    live = LiveStopping.from_frame(order, read_llm_grades(judgments), threshold=2, target=target)
    log = GradeLog(grade_log_path(sample, "ann"), "ann")
    return AnnotateServer(list(items), log, neutral_scale(), live=live)


def calibrate_share(folder: Path, sample: Path, judgments: Path, capsys: Any) -> dict[str, Any]:
    """Export `ann`'s grades and run `relgrade calibrate` on them: the relevant share's JSON."""
    human = folder / "human.csv"
    assert main(["annotate", str(sample), "--annotator", "ann", "--export", str(human)]) == 0
    capsys.readouterr()
    argv = ["calibrate", "--llm", str(judgments), "--human", str(human), "--format", "json"]
    assert main([*argv, "--bootstrap", "0", "--human-scale", "0-3"]) == 0
    share: dict[str, Any] = json.loads(capsys.readouterr().out)["estimates"]["relevant_share"]
    return share
