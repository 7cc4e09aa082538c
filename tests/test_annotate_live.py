"""The grading page's live stopping figures over HTTP (the browser test: test_annotate_stop.py).

After each grade the server's reply holds the relevant share's estimate and confidence sequence;
they must equal what `relgrade calibrate` reports on the same grades, and say "you may stop"
once the half-width reaches the target.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from calibration.spotcheck.blind import read_blind_csv
from grader.cli.main import main
from tests.helpers.active_sample import active_sample, calibrate_share, live_server


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url + "api/grade",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as reply:
        out: dict[str, Any] = json.loads(reply.read())
        return out


@pytest.mark.slow
def test_live_figures_follow_each_grade_and_equal_calibrate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sample, judgments, llm = active_sample(tmp_path)
    server = live_server(sample, judgments, target=0.15)
    url = server.start()
    try:
        with urllib.request.urlopen(url + "api/state", timeout=10) as reply:
            state = json.loads(reply.read())
        assert state["live"]["available"] is False and "grade the first" in state["live"]["note"]
        items = read_blind_csv(sample)
        live: dict[str, Any] = {}
        for t, item in enumerate(items, 1):
            grade = llm[(item.query_id, item.doc_id)]
            if t % 7 == 0:  # people disagree now and then
                grade = 1 if grade >= 2 else 2
            reply = _post(url, {"query_id": item.query_id, "doc_id": item.doc_id, "grade": grade})
            live = reply["live"]
            if t >= 2:
                assert live["available"] and live["n"] == t
            if live.get("may_stop"):
                break
        assert live["may_stop"] and live["half_width"] <= 0.15 and live["more"] == 0
    finally:
        server.stop()
    share = calibrate_share(tmp_path, sample, judgments, capsys)
    assert share["cs_n"] == live["n"]
    assert share["cs_estimate"] == pytest.approx(live["estimate"], abs=1e-12)
    assert share["cs"] == pytest.approx(live["cs"], abs=1e-12)
    assert share["more_for_0_05"] == live["more_for_0_05"]


def test_annotate_without_the_llm_grades_serves_no_live_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from calibration.spotcheck.manifest import find_manifest, read_manifest
    from grader.cli import annotate

    sample, judgments, _ = active_sample(tmp_path)
    found = find_manifest(sample)
    assert found is not None
    manifest = read_manifest(found)
    judgments.rename(tmp_path / "moved.jsonl")
    args = annotate_args(sample)
    assert annotate._live(args, manifest) is None
    assert "pass --llm J" in capsys.readouterr().err
    args.llm = str(tmp_path / "moved.jsonl")
    live = annotate._live(args, manifest)
    assert live is not None and live.target == 0.05 and live.threshold == 2
    assert main(["annotate", str(sample), "--target", "1.5", "--no-browser"]) == 2


def annotate_args(sample: Path) -> Any:
    import argparse

    return argparse.Namespace(sample=str(sample), llm=None, threshold=None, target=0.05)
