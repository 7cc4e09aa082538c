"""One calibration as `relgrade calibrate` computes it; the command and `relgrade.calibrate` both
load their inputs with `load_inputs` and call `calibrate_grades`, so they give the same summary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from calibration.join import PairedGrades, pair_keys
from calibration.spotcheck.design_sample import (
    DesignSplit,
    ManifestInUse,
    check_belongs,
    keep_for_also_judged,
    resolve_manifest,
    split_weights,
)
from calibration.summary_model import CalibrationSummary, DesignSample
from grader.errors import InputError
from grader.io.python_inputs import grades_table, is_path, llm_grades_table, on_scale, run_frames


@dataclass
class CalibrationInputs:
    """The grade frames, runs by name, and the paths they came from (None for a frame)."""

    llm: pd.DataFrame
    human: pd.DataFrame
    llm_path: str | None
    human_path: str | None
    runs: Mapping[str, pd.DataFrame]
    second_human: pd.DataFrame | None = None
    second_name: str | None = None
    manifest: str | Path | None = None
    no_manifest: bool = False
    doc_lengths: Mapping[str, int] | None = None
    human_scale: str | None = None
    """The scale people graded on ("0-3", "binary"); None: inferred."""


def _grades(value: Any, what: str, *, clamp: bool, judge: str | None = None) -> pd.DataFrame:
    if is_path(value):
        from grader.io.grades import read_human_grades, read_llm_grades

        if what == "llm":
            return read_llm_grades(value, clamp=clamp, judge=judge)
        return read_human_grades(value, clamp=clamp)
    if what == "llm":
        frame = llm_grades_table(value, clamp=clamp)
        if judge is not None and "judge" in frame.columns:
            frame = frame[frame["judge"] == judge].reset_index(drop=True)
        return frame
    return on_scale(grades_table(value, f"{what} grades"), f"{what} grades", clamp=clamp)


def load_inputs(
    llm: Any,
    human: Any,
    *,
    runs: Any = None,
    second_human: Any = None,
    docs: Any = None,
    clamp: bool = False,
    judge: str | None = None,
    **options: Any,
) -> CalibrationInputs:
    """Grades, runs and docs as paths or in-memory forms; `options`: manifest, no_manifest,
    human_scale."""
    from grader.io.docs import all_docs

    llm_frame = _grades(llm, "llm", clamp=clamp, judge=judge)
    human_frame = _grades(human, "human", clamp=clamp)
    lengths = None
    if docs is not None:
        texts = all_docs(docs, ids=set(human_frame["doc_id"]) | set(llm_frame["doc_id"]))
        lengths = {doc_id: len(doc.text) for doc_id, doc in texts.items()}
    return CalibrationInputs(
        llm=llm_frame,
        human=human_frame,
        llm_path=str(llm) if is_path(llm) else None,
        human_path=str(human) if is_path(human) else None,
        runs=run_frames(runs),
        second_human=None if second_human is None else _grades(second_human, "human", clamp=clamp),
        second_name=str(second_human) if is_path(second_human) else None,
        doc_lengths=lengths,
        **options,
    )


def _design(use: ManifestInUse) -> tuple[Any, Any]:
    """The sample design a manifest records and the draw order of a uniform or active sample
    (or None)."""
    from calibration.spotcheck.stopping import DrawOrder
    from calibration.stats.ppi import design_of_strategy

    try:
        design = design_of_strategy(use.manifest.strategy, sampled=len(use.manifest.pairs))
    except ValueError as exc:
        raise InputError(
            str(exc), path=use.path, hint="it is written by `relgrade sample`; redraw the sample"
        ) from None
    return design, DrawOrder.from_manifest(use.manifest)


def _design_sample(use: ManifestInUse, paired: PairedGrades, split: DesignSplit) -> DesignSample:
    """The agreement figures of the manifest's pairs graded by both, weighted by 1/pi."""
    from calibration.stats.agreement import agreement

    rows = paired.frame[split.in_design]
    figures = agreement(rows["human"].to_numpy(), rows["llm"].to_numpy(), split.design_weights)
    m = use.manifest
    return DesignSample.model_validate(  # the model keeps the figures it names
        {
            **figures,
            "outside": split.outside,
            "population": m.population,
            "strategy": m.strategy,
            "manifest": str(use.path),
        }
    )


def calibrate_grades(
    llm: Any,
    human: Any,
    *,
    measures: Sequence[Any] | None = None,
    seed: int = 0,
    bootstrap: int = 1000,
    threshold: int = 2,
    **inputs: Any,
) -> CalibrationSummary:
    """The summary `relgrade calibrate` prints (tables) and writes (`--format json`, report);
    `inputs` are `load_inputs`' keywords."""
    from calibration.join import pair_grades
    from calibration.summary import DEFAULT_MEASURE, summarize

    if bootstrap < 0:
        raise InputError("--bootstrap must be 0 or more")
    given = load_inputs(llm, human, **inputs)
    human = _check_human_scale(given)
    use = resolve_manifest(given.manifest, given.human_path, given.llm_path, given.no_manifest)
    llm, also_note = given.llm, None
    if use is not None and use.also_judged:
        check_belongs(use, llm)
        llm, also_note = keep_for_also_judged(llm, human, use)
    paired = pair_grades(llm, human)
    weights, design, order, split = None, None, None, None
    if use is not None:
        split = split_weights(use, paired.frame)
        weights = split.weights
        design, order = _design(use)
    names = [str(m) for m in measures or [DEFAULT_MEASURE]]
    if given.runs:
        from grader.metrics import parse_measure

        names = [str(parse_measure(m)) for m in names]
    summary = summarize(
        llm,
        human,
        runs=given.runs,
        measures=names,
        doc_lengths=given.doc_lengths,
        weights=weights,
        seed=seed,
        n_bootstrap=bootstrap,
        threshold=threshold,
        paired=paired,
        design=design,
        order=order,
        human_scale=given.human_scale,
    )
    _add_inputs(summary, given, llm, paired, weights)
    if use is not None and split is not None:
        summary.manifest = str(use.path)
        summary.design_sample = _design_sample(use, paired, split)
        summary.counts.design_sample = summary.design_sample.n
        summary.notes.insert(0, _weights_note(str(use.path), split, paired.n))
    if also_note:
        summary.notes.insert(0, also_note)
    summary.warnings.extend(_coverage_warnings(given, llm, summary.manifest or ""))
    return summary


def _add_inputs(
    summary: CalibrationSummary,
    given: CalibrationInputs,
    llm: Any,
    paired: PairedGrades,
    weights: Any,
) -> None:
    """The inputs' names, a second person's agreement, and the notes on what reading left out."""
    from calibration.summary_model import Inputs

    second = given.second_human
    if second is not None:
        from calibration.stats.agreement import human_vs_human

        keys = pair_keys(paired.frame)
        pair_weights = None if weights is None else dict(zip(keys, weights, strict=True))
        summary.human_vs_human = human_vs_human(given.human, second, llm, pair_weights)
    summary.manifest = None
    summary.inputs = Inputs(
        llm=given.llm_path or "(DataFrame)",
        human=given.human_path or "(DataFrame)",
        second_human=given.second_name,
        runs=list(given.runs),
    )
    summary.notes.extend(_input_notes(llm, given.human, second))


def _weights_note(manifest: str, split: DesignSplit, n: int) -> str:
    """Which figures the manifest's weights serve."""
    if not split.outside:
        return f"every figure is weighted by 1/pi from {manifest}"
    inside = n - split.outside
    return (
        f"agreement uses all {n} pairs graded by both, unweighted: {split.outside} of them are "
        f"not in the manifest {manifest}, so their inclusion probability is unknown; the "
        f"design figures (`design_sample`) use its {inside} pairs weighted by 1/pi"
    )


def _check_human_scale(given: CalibrationInputs) -> pd.DataFrame:
    """The human grades, unless --human-scale binary meets a grade above 1 (an error)."""
    human = given.human
    if given.human_scale == "binary" and len(human) and int(human["grade"].max()) > 1:
        raise InputError(
            f"--human-scale binary, but a human grade is {int(human['grade'].max())}",
            path=given.human_path,
            hint="binary grades are 0 and 1; use --human-scale 0-3 or leave it out",
        )
    return human


NOTES = (  # (attrs key, what it says, whether the LLM side can have it)
    ("failed", "{} failed judgments in {} were left out (never a grade)", True),
    ("clamped", "{} grades outside 0..3 in {} were clamped (--clamp)", True),
    ("ungraded", "{} rows in {} have an empty grade and were left out", False),
)


def _input_notes(llm: Any, human: Any, second: Any | None) -> list[str]:
    """Notes on what reading the grades left out or changed (an empty grade is never a 0)."""
    inputs = [("--llm", llm), ("--human", human)] + (
        [("--second-human", second)] if second is not None else []
    )
    return [
        text.format(frame.attrs[key], flag)
        for key, text, llm_too in NOTES
        for flag, frame in inputs[0 if llm_too else 1 :]
        if frame.attrs.get(key, 0)
    ]


def _coverage_warnings(given: CalibrationInputs, llm: pd.DataFrame, manifest: str) -> list[str]:
    """Human grades that look like a sample but have no manifest; sampled pairs never graded."""
    from calibration.spotcheck.design_sample import (
        ungraded_sample_warning,
        unweighted_sample_warning,
    )
    from calibration.spotcheck.manifest import read_manifest

    if manifest:
        found = ungraded_sample_warning(read_manifest(manifest), given.human)
    elif not given.no_manifest:
        where = given.human_path or "the human grades DataFrame"
        found = unweighted_sample_warning(llm, given.human, where)
    else:
        found = None
    return [found] if found else []
