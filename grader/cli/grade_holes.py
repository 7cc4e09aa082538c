"""`grade --skip-judged HUMAN_QRELS` on top of people's labels: the holes report, `--merged-out`,
`--llm-scale`, `--also-judged N` (with its manifest), and the `source` of each `--out` line.

The rules are `grader.grading.holes`'s; the also-judged draw and its manifest are
`calibration.spotcheck.also_judged`'s (the command line is where the two meet).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
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
from grader.io.people_grades import parse_llm_scale, read_people_grades


def add_flags(p: argparse.ArgumentParser) -> None:
    """The flags of labels on top of people's (see DESIGN.md)."""
    p.add_argument(
        "--merged-out",
        metavar="MERGED.qrels",
        help="with one --skip-judged: write people's grades (as written, any integer) and the "
        "LLM's on the holes, as TREC qrels; failed judgments stay holes",
    )
    p.add_argument(
        "--llm-scale",
        metavar="MAP",
        help="how --merged-out writes LLM grades, e.g. 0:0,1:1,2:4,3:7 for a 0..7 human scale "
        "(default identity 0:0,1:1,2:2,3:3)",
    )
    p.add_argument(
        "--also-judged",
        type=int,
        metavar="N",
        help="also grade N pairs people judged (drawn at random, seeded by --seed) so that "
        "calibrate measures agreement on this collection; the draw's manifest is written "
        "beside --out / --qrels-out",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of --also-judged's draw (0)")
    p.add_argument(
        "--stratify",
        action="store_true",
        help="--also-judged draws the same expected count from each human grade",
    )


@dataclass
class Plan:
    """What `--skip-judged` with people's grades asks of one grade run."""

    holes: Holes
    scale: dict[int, int] | None
    seed: int
    stratify: bool
    also_n: int | None
    draw: Any = None  # the also-judged SampleDraw
    human_path: str = ""
    pairs: list[PairId] = field(default_factory=list)  # the graded pairs, in output order


def plan(args: argparse.Namespace) -> Plan | None:
    """The plan when `--skip-judged` is given with one file, else None (checks the flags)."""
    wants = args.merged_out or args.also_judged is not None or args.llm_scale
    if not args.skip_judged:
        if wants:
            raise InputError(
                "--merged-out, --also-judged and --llm-scale need --skip-judged HUMAN_QRELS"
            )
        return None
    if len(args.skip_judged) > 1:
        if wants:
            raise InputError("--merged-out and --also-judged take one --skip-judged file")
        return None
    if args.also_judged is not None and not (args.out or args.qrels_out):
        raise InputError(
            "--also-judged needs --out or --qrels-out",
            hint="calibrate reads the LLM's grades of the drawn pairs from there",
        )
    human = read_people_grades(args.skip_judged[0])
    scale = parse_llm_scale(args.llm_scale or "0:0,1:1,2:2,3:3")
    return Plan(
        holes=Holes(human=human),
        scale=scale if args.merged_out or args.llm_scale else None,
        seed=args.seed,
        stratify=args.stratify,
        also_n=args.also_judged,
        human_path=str(args.skip_judged[0]),
    )


def selection_kwargs(found: Plan | None) -> dict[str, Any]:
    """The extra arguments of `pairs_to_grade` for the plan."""
    if found is None:
        return {}
    human = found.holes.human
    judged = set(zip(human["query_id"].astype(str), human["doc_id"].astype(str), strict=True))

    def regrade(pool: list[PairId]) -> set[PairId]:
        if found.also_n is None or not pool:
            return set()
        from calibration.spotcheck.also_judged import draw_also_judged

        grades = {
            (str(q), str(d)): int(g)
            for q, d, g in human[["query_id", "doc_id", "grade"]].itertuples(index=False)
        }
        found.draw = draw_also_judged(
            pool, grades, n=found.also_n, seed=found.seed, stratify=found.stratify
        )
        return {(p.query_id, p.doc_id) for p in found.draw.pairs}

    return {"judged_pairs": judged, "regrade_judged": regrade}


def take_selection(found: Plan, selection: PairSelection, args: argparse.Namespace) -> None:
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


def manifest_paths(args: argparse.Namespace) -> dict[Path, str]:
    """Where `--also-judged`'s manifest goes, each with the output it is beside: beside --out
    and beside --qrels-out (once when both give the same `<stem>.manifest.json`)."""
    if getattr(args, "also_judged", None) is None:
        return {}
    from calibration.spotcheck.manifest import manifest_path_for

    found: dict[Path, str] = {}
    for target in (args.out, args.qrels_out):
        if target:
            found.setdefault(manifest_path_for(target), target)
    return found


def write_outputs(args: argparse.Namespace, report: GradingReport, found: Plan | None) -> None:
    """`--out` (with `source` per line when people's grades are given), `--qrels-out` and
    `--merged-out`, each atomically, in one output set with the also-judged manifest beside
    --out / --qrels-out. The manifest goes first: outputs never stand without the draw that
    weights them, and a kill before the last file is told to the next run."""
    from grader.io.files import atomic_write
    from grader.io.output_set import OutputSet

    merged = getattr(args, "merged_out", None) if found is not None else None
    manifests = manifest_paths(args) if found is not None and found.draw is not None else {}
    outputs = OutputSet([*(p for p in (args.out, args.qrels_out, merged) if p), *manifests])
    outputs.begin()  # a kill between the files is told to the next run
    if found is not None and manifests:
        from calibration.spotcheck.also_judged import also_judged_manifest, write_also_judged

        manifest = also_judged_manifest(found.draw, found.human_path)
        for path, beside in manifests.items():
            write_also_judged(manifest, beside)
            outputs.done(path)
    # One pass over the outputs (stored answers stream from the store, a block at a time)
    # writes --out and keeps the qrels lines: a failed judgment has no grade, so it is
    # unjudged in the qrels, never 0.
    qrels: list[str] = []
    also = found.holes.also if found is not None else set()
    if args.out:
        pairs: Iterator[PairId] | None = iter(found.pairs) if found is not None else None
        with atomic_write(args.out) as out:
            for block in report.blocks():
                out.write(block.lines if pairs is None else with_source(block.lines, pairs, also))
                qrels.append(block.qrels)
        outputs.done(args.out)
    elif args.qrels_out or merged:
        qrels = [block.qrels for block in report.blocks()]
    if args.qrels_out:
        with atomic_write(args.qrels_out) as out:
            out.writelines(qrels)
        outputs.done(args.qrels_out)
    if merged and found is not None:
        assert found.scale is not None
        with atomic_write(merged) as out:
            out.writelines(merged_lines(found.holes.human, qrels, also, found.scale))
    outputs.finish()
