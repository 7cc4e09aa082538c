"""Whether human grades cover their sample: warnings for figures that may silently mislead.

Two cases cost a user the truth without a word:
- human grades that look like a sample of the LLM-graded pairs (every human pair is LLM-graded,
  and they are fewer than `SAMPLE_SHARE` of them) with no manifest: every figure is then
  unweighted, which is biased when the sample was not uniform (a stratified sample
  over-represents rare grades);
- a manifest whose sampled pairs were not all graded: the figures rest on the graded ones, which
  stand for the rest only if people did not skip the hard ones.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from calibration.spotcheck.manifest import Manifest, manifest_path_for

SAMPLE_SHARE = 0.9
"""Human pairs below this share of the LLM pairs (and none outside them) look like a sample."""


def _pairs(frame: pd.DataFrame) -> set[tuple[str, str]]:
    return set(zip(frame["query_id"].astype(str), frame["doc_id"].astype(str), strict=True))


def unweighted_sample_warning(
    llm: pd.DataFrame, human: pd.DataFrame, human_path: str | Path
) -> str | None:
    """The warning for human grades that look like a sample of `llm` but have no manifest."""
    llm_pairs, human_pairs = _pairs(llm), _pairs(human)
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
    ungraded = len(sampled - _pairs(human))
    if not ungraded:
        return None
    return (
        f"{ungraded} of the {len(sampled)} sampled pairs in the manifest were never graded "
        f"(skipped or not done): the figures rest on the {len(sampled) - ungraded} graded ones, "
        "and are biased if the ungraded ones differ (people tend to skip the hard ones); grade "
        "them to remove that doubt"
    )
