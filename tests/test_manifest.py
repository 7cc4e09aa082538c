"""The sample manifest: written beside the sample, read back, weights aligned to grade rows."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from calibration.spotcheck.manifest import (
    Manifest,
    build_manifest,
    copy_manifest_beside,
    find_manifest,
    manifest_path_for,
    read_manifest,
    sample_weights,
    write_manifest,
)
from calibration.spotcheck.sampling import SampleDraw, draw_sample
from grader.errors import InputError
from tests.helpers.sampling import population


def _manifest(tmp_path: Path) -> tuple[SampleDraw, Manifest]:
    source = tmp_path / "j.jsonl"
    source.write_text("{}\n")
    draw = draw_sample(population({0: 30, 1: 10, 2: 6, 3: 4}), strategy="stratified", n=12, seed=9)
    return draw, build_manifest(draw, source=source, prompt="passage@1", excluded={"failed": 2})


def test_manifest_round_trips_and_records_design_and_source(tmp_path: Path) -> None:
    _draw, manifest = _manifest(tmp_path)
    path = manifest_path_for(tmp_path / "sample.csv")
    assert path.name == "sample.manifest.json"
    write_manifest(path, manifest)
    raw = json.loads(path.read_text())
    assert raw["strategy"] == "stratified" and raw["seed"] == 9 and raw["population"] == 50
    assert raw["allocation"] == "equal"
    assert raw["source"]["sha256"].startswith("sha256:")
    assert raw["excluded"] == {"failed": 2}
    assert {"query_id", "doc_id", "inclusion_probability", "stratum"} <= set(raw["pairs"][0])
    back = read_manifest(path)
    assert back.probabilities() == manifest.probabilities()
    assert len(back.pairs) == 12


def test_sample_weights_follow_frame_rows(tmp_path: Path) -> None:
    draw, manifest = _manifest(tmp_path)
    rows = list(reversed(draw.pairs))
    frame = pd.DataFrame(
        {"query_id": [p.query_id for p in rows], "doc_id": [p.doc_id for p in rows]}
    )
    weights = sample_weights(manifest, frame)
    expected = np.array([1 / p.inclusion_probability for p in rows])
    assert weights == pytest.approx(expected)


def test_a_pair_outside_the_manifest_is_an_error_naming_it(tmp_path: Path) -> None:
    _, manifest = _manifest(tmp_path)
    frame = pd.DataFrame({"query_id": ["qX"], "doc_id": ["dX"]})
    with pytest.raises(InputError, match=r"\(qX, dX\)"):
        sample_weights(manifest, frame)


def test_invalid_manifests_are_reported_with_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.manifest.json"
    bad.write_text("{not json")
    with pytest.raises(InputError, match=r"bad\.manifest\.json:1"):
        read_manifest(bad)
    zero = tmp_path / "zero.manifest.json"
    zero.write_text(
        json.dumps(
            {
                "strategy": "uniform",
                "seed": 1,
                "population": 3,
                "pairs": [{"query_id": "q", "doc_id": "d", "inclusion_probability": 0}],
            }
        )
    )
    with pytest.raises(InputError, match="inclusion_probability"):
        read_manifest(zero)


def test_the_manifest_travels_beside_the_grades_file(tmp_path: Path) -> None:
    _, manifest = _manifest(tmp_path)
    grades = tmp_path / "human.csv"
    grades.write_text("query_id,doc_id,grade\n")
    assert find_manifest(grades) is None
    written = copy_manifest_beside(manifest, grades)
    assert written == tmp_path / "human.manifest.json"
    assert find_manifest(grades) == written
    assert manifest_path_for(tmp_path / "qrels.txt.gz").name == "qrels.manifest.json"
