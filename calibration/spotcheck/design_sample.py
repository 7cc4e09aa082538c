"""Which pairs a sample manifest speaks for, whether it belongs to the grades at hand, and
warnings when human grades do not cover their sample. Agreement uses every pair graded by both;
the design sample (`design_sample`) only the manifest's pairs, weighted by 1/pi."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from calibration.join import pair_keys
from calibration.spotcheck.also_judged import is_also_judged
from calibration.spotcheck.manifest import (
    Manifest,
    find_manifest,
    manifest_path_for,
    read_manifest,
)
from grader.errors import InputError


@dataclass(frozen=True)
class ManifestInUse:
    """The manifest calibrate weights by: its path, contents, and whether it is an also-judged
    draw (beside `--llm`) rather than a spot-check sample (beside `--human`)."""

    path: Path
    manifest: Manifest
    also_judged: bool


def resolve_manifest(
    given: str | Path | None, human_path: str | None, llm_path: str | None, no_manifest: bool
) -> ManifestInUse | None:
    """`--manifest` when given; else the sample manifest beside `--human`, else an also-judged
    manifest beside `--llm`; None with `--no-manifest` or when there is none."""
    if given is not None:
        found = read_manifest(given)
        return ManifestInUse(Path(given), found, is_also_judged(found))
    if no_manifest:
        return None
    beside = find_manifest(human_path) if human_path is not None else None
    if beside is not None:
        found = read_manifest(beside)
        return ManifestInUse(beside, found, is_also_judged(found))
    beside = find_manifest(llm_path) if llm_path is not None else None
    if beside is None:
        return None
    found = read_manifest(beside)
    return ManifestInUse(beside, found, True) if is_also_judged(found) else None


def check_belongs(use: ManifestInUse, llm: pd.DataFrame) -> None:
    """Refuse an also-judged manifest whose drawn pairs the LLM did not grade (another draw, as
    `evaluate --fill` refuses it); as many as the judgments that failed are allowed."""
    if not use.also_judged:
        return
    graded = set(pair_keys(llm))
    missing = [p for p in use.manifest.probabilities() if p not in graded]
    failed = int(llm.attrs.get("failed", 0) or 0)
    if len(missing) <= failed:
        return
    q, d = missing[0]
    raise InputError(
        f"the also-judged manifest does not belong to these LLM grades: {len(missing)} of its "
        f"{len(use.manifest.pairs)} drawn pairs have no LLM grade (e.g. ({q}, {d})) and only "
        f"{failed} judgments failed; it records another draw (another --seed or --also-judged N) "
        "or was left by an interrupted grade",
        path=use.path,
        hint="pass the manifest written with these judgments (--manifest), or --no-manifest",
    )


def keep_for_also_judged(
    llm: pd.DataFrame, human: pd.DataFrame, use: ManifestInUse
) -> tuple[pd.DataFrame, str]:
    """The LLM grades calibrate uses with an also-judged manifest: the drawn pairs and every
    other pair people graded too; the holes nobody graded are left out. And a note saying so."""
    drawn = set(use.manifest.probabilities())
    people = set(pair_keys(human))
    keep = [k in drawn or k in people for k in pair_keys(llm)]
    kept = llm[keep]
    kept.attrs.update(llm.attrs)
    m = use.manifest
    note = (
        f"also-judged: {len(m.pairs):,} pairs drawn ({m.strategy}) from the {m.population:,} "
        f"judged pairs of the runs (the manifest {use.path}); the design figures are weighted "
        f"back to that judged pool; {len(llm) - len(kept):,} LLM grades of holes (no human "
        "grade) are left out"
    )
    return kept, note


@dataclass(frozen=True)
class DesignSplit:
    """Weights for the paired pairs: `weights` for every figure when each paired pair is in the
    manifest (else None: agreement is unweighted), and the design sample's rows and 1/pi."""

    weights: npt.NDArray[np.float64] | None
    in_design: npt.NDArray[np.bool_]
    design_weights: npt.NDArray[np.float64]

    @property
    def outside(self) -> int:
        """Paired pairs the manifest does not hold (graded by both, outside the design)."""
        return int((~self.in_design).sum())


def split_weights(use: ManifestInUse, frame: pd.DataFrame) -> DesignSplit:
    """1/pi of the paired pairs the manifest holds. A spot-check sample (beside --human) must
    hold every pair people graded (`sample_weights` says which it lacks); an also-judged draw
    holds only the drawn ones, and the others count for agreement, unweighted."""
    from calibration.spotcheck.manifest import sample_weights

    if not use.also_judged:
        w = np.asarray(sample_weights(use.manifest, frame), dtype=np.float64)
        return DesignSplit(w, np.ones(len(frame), dtype=bool), w)
    probs = use.manifest.probabilities()
    pi = np.array([probs.get(k, np.nan) for k in pair_keys(frame)], dtype=np.float64)
    inside = ~np.isnan(pi)
    w = np.where(inside, 1.0 / np.where(inside, pi, 1.0), np.nan)
    return DesignSplit(w if inside.all() else None, inside, w[inside])


SAMPLE_SHARE = 0.9
"""Human pairs below this share of the LLM pairs (and none outside them) look like a sample."""


def unweighted_sample_warning(
    llm: pd.DataFrame, human: pd.DataFrame, human_path: str | Path
) -> str | None:
    """The warning for human grades that look like a sample of `llm` but have no manifest."""
    llm_pairs, human_pairs = set(pair_keys(llm)), set(pair_keys(human))
    if not human_pairs or not human_pairs < llm_pairs:
        return None
    if len(human_pairs) >= SAMPLE_SHARE * len(llm_pairs):
        return None
    share = len(human_pairs) / len(llm_pairs)
    return (
        f"the human grades look like a sample ({len(human_pairs)} of the {len(llm_pairs)} "
        f"LLM-graded pairs, {share:.1%}, and no other pair) but no sample manifest was found "
        f"beside {human_path} ({manifest_path_for(human_path).name}): every figure is "
        "UNWEIGHTED and biased unless the sample was uniform (a stratified, uncertainty or low "
        "sample over-represents some grades). Keep the sample's manifest beside the CSV "
        "(`relgrade sample --import` and `relgrade annotate --export` put it there) or pass "
        "--manifest SAMPLE.manifest.json; --no-manifest if these grades are not a sample"
    )


def ungraded_sample_warning(manifest: Manifest, human: pd.DataFrame) -> str | None:
    """The warning for sampled pairs (in `manifest`) that have no human grade."""
    sampled = set(manifest.probabilities())
    ungraded = len(sampled - set(pair_keys(human)))
    if not ungraded:
        return None
    return (
        f"{ungraded} of the {len(sampled)} sampled pairs in the manifest were never graded "
        f"(skipped or not done): the figures rest on the {len(sampled) - ungraded} graded ones, "
        "and are biased if the ungraded ones differ (people tend to skip the hard ones); grade "
        "them to remove that doubt"
    )
