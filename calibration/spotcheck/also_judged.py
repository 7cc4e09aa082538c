"""`grade --also-judged N`: N pairs people already judged, drawn at random (uniform, or stratified
by human grade) to be graded too, and the manifest (`kind: "also-judged"`) that lets `calibrate`
and `evaluate --fill` weight them back to the judged pool."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import numpy as np

from calibration.spotcheck.manifest import (
    Manifest,
    build_manifest,
    copy_manifest_beside,
    manifest_path_for,
)
from calibration.spotcheck.sampling import (
    SampledPair,
    SampleDraw,
    strata_of,
    strata_table,
    stratified_draw,
    stratum_pi,
)
from grader.errors import InputError

KIND = "also-judged"
__all__ = [  # the grade job is given this module: the manifest's path and writer come with it
    "also_judged_manifest",
    "also_judged_weights",
    "copy_manifest_beside",
    "draw_also_judged",
    "fill_design",
    "is_also_judged",
    "manifest_path_for",
]


def draw_also_judged(
    judged: Sequence[tuple[str, str]],
    grades: Mapping[tuple[str, str], int],
    *,
    n: int,
    seed: int,
    stratify: bool = False,
) -> SampleDraw:
    """Draw `n` of the `judged` pairs (uniform, or stratified by human grade, equal allocation)
    with their exact inclusion probabilities; the pairs come back in pool order."""
    if n < 1:
        raise InputError(f"--also-judged must be at least 1, got {n}")
    if n > len(judged):
        raise InputError(
            f"--also-judged {n}: only {len(judged):,} pairs of the runs' top --depth are judged",
            hint="lower --also-judged",
        )
    labels = [f"human grade {grades[p]}" if stratify else "judged" for p in judged]
    keys, stratum, sizes = strata_of(labels)
    strategy = "stratified" if stratify else "uniform"
    pi, expected, _ = stratum_pi(strategy, "equal", keys, sizes, stratum, n, 0.0)
    pi = np.clip(pi, 0.0, 1.0)
    chosen = np.sort(stratified_draw(pi, stratum, np.random.default_rng(seed)))
    pairs = [
        SampledPair(judged[i][0], judged[i][1], float(pi[i]), labels[i]) for i in chosen.tolist()
    ]
    return SampleDraw(
        strategy=strategy,
        allocation="equal" if stratify else None,
        population=len(judged),
        strata=strata_table(keys, sizes, expected),
        pairs=pairs,
        seed=seed,
    )


def also_judged_manifest(draw: SampleDraw, human: str | Path) -> Manifest:
    """The manifest of an also-judged draw: `kind` "also-judged", the human qrels as source."""
    manifest = build_manifest(draw, source=human)
    data = manifest.model_dump(mode="json")
    data["kind"] = KIND
    return Manifest.model_validate(data)


def is_also_judged(manifest: Manifest) -> bool:
    """Whether a manifest records an also-judged draw (not a spot-check sample)."""
    return (manifest.model_extra or {}).get("kind") == KIND


def also_judged_weights(
    llm_path: str | Path | None, manifest: str | Path | None = None
) -> tuple[dict[tuple[str, str], float] | None, str]:
    """1/pi of each pair of `manifest` (any manifest), else of the also-judged manifest beside
    `llm_path`, and the manifest's path; (None, "") when there is none."""
    from calibration.spotcheck.manifest import find_manifest, read_manifest

    path = manifest
    if path is None and llm_path is not None:
        path = find_manifest(llm_path)
    if path is None:
        return None, ""
    found = read_manifest(path)
    if not is_also_judged(found) and manifest is None:
        return None, ""
    return {k: 1.0 / p for k, p in found.probabilities().items()}, str(path)


def fill_design(manifest: str | Path | None) -> Literal["judged", "holes"]:
    """Where the pairs graded by both were drawn, for `evaluate --fill`: "judged" for an
    also-judged manifest (or none), "holes" for a `relgrade sample` manifest (a sample of the
    LLM-graded holes, graded by people and given with their qrels)."""
    if not manifest:
        return "judged"
    from calibration.spotcheck.manifest import read_manifest

    return "judged" if is_also_judged(read_manifest(manifest)) else "holes"
