"""Grading on top of people's labels (one `skip_judged` qrels): the holes report, `merged_out`,
`llm_scale`, `also_judged` and the `source` of each `--out` line (`grader.grading.holes`'s
rules). The also-judged draw is calibration's, given by the caller (`AlsoJudged`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import Any

from grader.errors import InputError
from grader.grading.holes import (
    Holes,
    PairId,
    check_overlap,
    holes_summary,
    merged_lines,
    with_source,
)
from grader.grading.pairs import PairSelection
from grader.grading.report import GradingReport
from grader.io.grades import parse_llm_scale, read_human_grades
from grader.io.python_inputs import is_path
from grader.job.judgments_and_qrels import Merged
from grader.job.options import GradeOptions

AlsoJudged = ModuleType
"""The module `calibration.spotcheck.also_judged` (its draw, manifest and path), given by the
caller: grader never imports calibration."""


@dataclass
class Plan:
    """What one `skip_judged` qrels of people's grades asks of a grade run."""

    holes: Holes
    scale: dict[int, int] | None
    options: GradeOptions
    tools: AlsoJudged
    draw: Any = None  # the also-judged SampleDraw
    pairs: list[PairId] = field(default_factory=list)  # the graded pairs, in output order


def plan(options: GradeOptions, tools: AlsoJudged) -> Plan | None:
    """The plan when `skip_judged` is one qrels, else None (checks the options)."""
    o = options
    wants = o.merged_out or o.also_judged is not None or o.llm_scale
    if not o.skip_judged:
        if wants:
            raise InputError(
                "--merged-out, --also-judged and --llm-scale need --skip-judged HUMAN_QRELS"
            )
        return None
    if len(o.skip_judged) > 1:
        if wants:
            raise InputError("--merged-out and --also-judged take one --skip-judged file")
        return None
    if o.also_judged is not None and not (o.out or o.qrels_out):
        raise InputError(
            "--also-judged needs --out or --qrels-out",
            hint="calibrate reads the LLM's grades of the drawn pairs from there",
        )
    given = o.skip_judged[0]
    if o.also_judged is not None and not is_path(given):
        raise InputError("--also-judged needs --skip-judged as a file (its manifest names it)")
    human = read_human_grades(given, any_grade=True) if is_path(given) else given
    scale = parse_llm_scale(o.llm_scale or "0:0,1:1,2:2,3:3")
    keep = scale if o.merged_out or o.llm_scale else None
    return Plan(holes=Holes(human=human), scale=keep, options=o, tools=tools)


def selection_kwargs(found: Plan | None) -> dict[str, Any]:
    """The extra arguments of `pairs_to_grade` for the plan."""
    if found is None:
        return {}
    human = found.holes.human
    judged = set(zip(human["query_id"].astype(str), human["doc_id"].astype(str), strict=True))

    def regrade(pool: list[PairId]) -> set[PairId]:
        o = found.options
        if o.also_judged is None or not pool:
            return set()
        grades = {
            (str(q), str(d)): int(g)
            for q, d, g in human[["query_id", "doc_id", "grade"]].itertuples(index=False)
        }
        found.draw = found.tools.draw_also_judged(
            pool, grades, n=o.also_judged, seed=o.seed, stratify=o.stratify
        )
        return {(p.query_id, p.doc_id) for p in found.draw.pairs}

    return {"judged_pairs": judged, "regrade_judged": regrade}


def take_selection(found: Plan, selection: PairSelection) -> None:
    """Record what the selection found against people's grades; a qrels of another
    collection (no shared query or pair) is an error."""
    holes = found.holes
    holes.candidates = len(selection.candidate_ids)
    holes.judged = selection.judged_ids
    if found.draw is not None:
        holes.also = {(p.query_id, p.doc_id) for p in found.draw.pairs}
    holes.not_retrieved = len(holes.human) - len(holes.judged)
    holes.skipped = selection.missing
    check_overlap(holes.human, selection.candidate_ids, len(holes.judged))
    found.pairs = [(p.query.query_id, p.doc.doc_id) for p in selection.pairs]


def summary(found: Plan, report: GradingReport, *, dry_run: bool = False) -> str:
    """The holes line of the summary (a dry run: the pairs it would send)."""
    return holes_summary(
        found.holes,
        sent=report.pairs - report.cached if dry_run else report.graded + report.failed,
        cached=report.cached,
        failed=sum(
            1
            for j in report.judgments
            if j.status != "ok" and (j.query_id, j.doc_id) not in found.holes.also
        ),
        scale=found.scale,
        dry_run=dry_run,
    )


def manifest_paths(options: GradeOptions, tools: AlsoJudged) -> dict[Path, str]:
    """Where `also_judged`'s manifest goes, each with the output it is beside: beside --out
    and beside --qrels-out (once when both give the same `<stem>.manifest.json`)."""
    if options.also_judged is None:
        return {}
    found: dict[Path, str] = {}
    for target in (options.out, options.qrels_out):
        if target:
            found.setdefault(tools.manifest_path_for(target), target)
    return found


def writer_args(found: Plan | None) -> dict[str, Any]:
    """What the plan adds to `write_judgments_and_qrels`: the manifests first, the `source` of
    each --out line, and --merged-out."""
    if found is None:
        return {}
    o, tools, also = found.options, found.tools, found.holes.also
    first: dict[Path, Callable[[], object]] = {}
    if found.draw is not None:
        manifest = tools.also_judged_manifest(found.draw, str(o.skip_judged[0]))
        for path, beside in manifest_paths(o, tools).items():
            first[path] = partial(tools.copy_manifest_beside, manifest, beside)
    pairs: Iterator[PairId] = iter(found.pairs)
    merged: Merged | None = None
    if o.merged_out:
        scale = found.scale or {}
        merged = (o.merged_out, lambda q: merged_lines(found.holes.human, q, also, scale))
    return {"first": first, "lines": lambda text: with_source(text, pairs, also), "merged": merged}
