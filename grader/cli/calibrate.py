"""`relgrade calibrate`: how far to trust LLM grades, measured against human grades.

Prints agreement (kappas, alpha, confusion, bias, per-query figures with query-bootstrap
intervals), bias by length and rank, system-ranking agreement with `--run`, PPI++ estimates when
people graded only part of the LLM-graded pairs, and an HTML report with `--report`.
`--fit-lexical` instead fits the offline judge's thresholds on the human grades.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from grader.cli.commands import COMMANDS
from grader.cli.flags import add_measures, add_runs
from grader.errors import InputError


def register(sub: Any) -> None:
    p = sub.add_parser(
        "calibrate",
        help=COMMANDS["calibrate"],
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--llm", help="LLM grades: judgments JSONL or TREC qrels")
    p.add_argument(
        "--human", required=True, help="human grades: CSV, TREC qrels or judgments JSONL"
    )
    p.add_argument(
        "--second-human",
        metavar="HUMAN2",
        help="a second person's grades of the same sample: human-vs-human agreement is shown "
        "beside LLM-vs-human, on the pairs all three graded",
    )
    add_runs(p, "TREC runs, to compare the systems they rank under both label sets")
    add_measures(
        p,
        "measures for systems and estimates (default nDCG@10); with several, the table shows "
        "each, and JSON keeps `systems` for the first and adds `systems_by_measure`",
    )
    p.add_argument("--clamp", action="store_true", help="move grades outside 0..3 to 0 or 3")
    p.add_argument(
        "--human-scale",
        choices=("0-3", "binary"),
        help="the scale people graded on (default: inferred; binary when every human grade is "
        "0 or 1): 0-3 for a 0..3 sample that happened to hold no 2 or 3",
    )
    p.add_argument("--report", type=Path, help="write a self-contained HTML report here")
    p.add_argument(
        "--format", choices=("table", "json"), default="table", help="table (default) or json"
    )
    p.add_argument("--docs", type=Path, help="document texts (for bias by length; --fit-lexical)")
    p.add_argument("--queries", type=Path, help="query texts (for --fit-lexical)")
    p.add_argument(
        "--manifest",
        type=Path,
        help="sample manifest to weight by (default: <human stem>.manifest.json if present)",
    )
    p.add_argument("--no-manifest", action="store_true", help="ignore a manifest beside --human")
    p.add_argument("--judge", help="with a judgments file holding several judges, use this one")
    p.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    p.add_argument(
        "--bootstrap", type=int, default=1000, help="bootstrap resamples (1000; 0: none)"
    )
    p.add_argument(
        "--threshold", type=int, default=2, choices=(1, 2, 3), help="relevant = grade >= this (2)"
    )
    p.add_argument(
        "--fit-lexical",
        action="store_true",
        help="fit the lexical judge's thresholds on --human (needs --queries and --docs)",
    )
    p.add_argument(
        "--lexical-out",
        type=Path,
        help="where --fit-lexical writes (default ./relgrade-lexical.toml, which grade reads)",
    )
    p.set_defaults(func=run)


def _weights(
    args: argparse.Namespace, frame: Any
) -> tuple[npt.NDArray[np.float64] | None, str, Any, Any]:
    """1/pi per paired pair, the manifest's path, the sample design it records (or None) and
    the draw order of a uniform or active sample (or None)."""
    from calibration.spotcheck.manifest import find_manifest, read_manifest, sample_weights
    from calibration.spotcheck.stopping import DrawOrder
    from calibration.stats.ppi_design import design_of_strategy

    path = args.manifest
    if path is None and not args.no_manifest:
        path = find_manifest(args.human) or _also_judged_manifest(args.llm)
    if path is None:
        return None, "", None, None
    manifest = read_manifest(path)
    try:
        design = design_of_strategy(manifest.strategy)
    except ValueError as exc:
        raise InputError(
            str(exc), path=path, hint="it is written by `relgrade sample`; redraw the sample"
        ) from None
    weights = np.asarray(sample_weights(manifest, frame), dtype=np.float64)
    return weights, str(path), design, DrawOrder.from_manifest(manifest)


def _also_judged_manifest(llm: str) -> Path | None:
    """The manifest `grade --also-judged` wrote beside the LLM's judgments, if there is one."""
    from calibration.spotcheck.also_judged import is_also_judged
    from calibration.spotcheck.manifest import find_manifest, read_manifest

    path = find_manifest(llm)
    return path if path is not None and is_also_judged(read_manifest(path)) else None


def _only_drawn(args: argparse.Namespace, llm: Any) -> tuple[Any, str | None]:
    """With an also-judged manifest: the LLM's grades of the drawn pairs only (the holes have
    no human grade and were not drawn), and a note saying so."""
    from calibration.spotcheck.also_judged import is_also_judged
    from calibration.spotcheck.manifest import read_manifest

    path = args.manifest or (None if args.no_manifest else _also_judged_manifest(args.llm))
    if path is None or args.no_manifest:
        return llm, None
    manifest = read_manifest(path)
    if not is_also_judged(manifest):
        return llm, None
    drawn = set(manifest.probabilities())
    keep = [(q, d) in drawn for q, d in zip(llm["query_id"], llm["doc_id"], strict=True)]
    kept = llm[keep]
    kept.attrs.update(llm.attrs)
    note = (
        f"also-judged: {len(manifest.pairs):,} pairs drawn ({manifest.strategy}) from the "
        f"{manifest.population:,} judged pairs of the runs (the manifest {path}); figures are "
        f"weighted back to that judged pool; {len(llm) - len(kept):,} LLM grades of holes "
        "(no human grade) are left out"
    )
    return kept, note


def run(args: argparse.Namespace) -> int:
    if args.fit_lexical:
        return _fit_lexical(args)
    if not args.llm:
        raise InputError("--llm is required", hint="give the LLM grades (judgments or qrels)")
    if args.bootstrap < 0:
        raise InputError("--bootstrap must be 0 or more")
    from calibration.join import pair_grades
    from calibration.summary import DEFAULT_MEASURE, summarize
    from calibration.summary_model import HumanVsHuman, Inputs
    from grader.io.grades import read_human_grades, read_llm_grades
    from grader.io.runs import read_runs

    llm = read_llm_grades(args.llm, clamp=args.clamp, judge=args.judge)
    human = _check_human_scale(args, read_human_grades(args.human, clamp=args.clamp))
    llm, also_note = _only_drawn(args, llm)
    paired = pair_grades(llm, human)
    weights, manifest, design, order = _weights(args, paired.frame)
    runs = read_runs(args.run)
    lengths = _doc_lengths(args.docs, set(paired.frame["doc_id"])) if args.docs else None
    measures = args.measures or [DEFAULT_MEASURE]
    if runs:
        from grader.metrics import parse_measure

        measures = [str(parse_measure(m)) for m in measures]
    summary = summarize(
        llm,
        human,
        runs=runs,
        measures=measures,
        doc_lengths=lengths,
        weights=weights,
        seed=args.seed,
        n_bootstrap=args.bootstrap,
        threshold=args.threshold,
        paired=paired,
        design=design,
        order=order,
        human_scale=args.human_scale,
    )
    second = None
    if args.second_human:
        from calibration.stats.interrater import human_vs_human

        second = read_human_grades(args.second_human, clamp=args.clamp)
        pair_weights = None
        if weights is not None:
            pair_weights = paired.frame[["query_id", "doc_id"]].assign(weight=weights)
        summary.human_vs_human = HumanVsHuman.model_validate(
            human_vs_human(human, second, llm, pair_weights)
        )
    summary.manifest = manifest or None
    summary.inputs = Inputs(
        llm=str(args.llm), human=str(args.human), second_human=args.second_human, runs=list(runs)
    )
    summary.notes.extend(_input_notes(llm, human, second))
    if manifest:
        summary.notes.insert(0, f"every figure is weighted by 1/pi from {manifest}")
    if also_note:
        summary.notes.insert(0, also_note)
    summary.warnings.extend(_coverage_warnings(args, llm, human, manifest))
    for warning in summary.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.report:
        from calibration.report.html import write_report

        write_report(args.report, summary)
    if args.format == "json":
        json.dump(summary.to_json(), sys.stdout, indent=2, allow_nan=False)
        sys.stdout.write("\n")
    else:
        from rich.console import Console

        from calibration.report.tables import render

        console = Console()
        console.print(render(summary))
        if args.report:
            console.print(f"report written to {args.report}", soft_wrap=True, highlight=False)
    return 0


def _check_human_scale(args: argparse.Namespace, human: Any) -> Any:
    """The human grades, unless --human-scale binary meets a grade above 1 (an error)."""
    if args.human_scale == "binary" and len(human) and int(human["grade"].max()) > 1:
        raise InputError(
            f"--human-scale binary, but a human grade is {int(human['grade'].max())}",
            path=args.human,
            hint="binary grades are 0 and 1; use --human-scale 0-3 or leave it out",
        )
    return human


def _input_notes(llm: Any, human: Any, second: Any | None) -> list[str]:
    """Notes on what reading the grades left out or changed: failed judgments, clamped grades,
    rows with an empty grade (never read as 0)."""
    notes: list[str] = []
    inputs = [("--llm", llm), ("--human", human)]
    if second is not None:
        inputs.append(("--second-human", second))
    for flag, frame in inputs:
        failed = frame.attrs.get("failed", 0)
        if failed:
            notes.append(f"{failed} failed judgments in {flag} were left out (never a grade)")
    for flag, frame in inputs:
        clamped = frame.attrs.get("clamped", 0)
        if clamped:
            notes.append(f"{clamped} grades outside 0..3 in {flag} were clamped (--clamp)")
    for flag, frame in inputs[1:]:
        ungraded = frame.attrs.get("ungraded", 0)
        if ungraded:
            notes.append(f"{ungraded} rows in {flag} have an empty grade and were left out")
    return notes


def _coverage_warnings(args: argparse.Namespace, llm: Any, human: Any, manifest: str) -> list[str]:
    """Human grades that look like a sample but have no manifest; sampled pairs never graded."""
    from calibration.spotcheck.coverage import ungraded_sample_warning, unweighted_sample_warning
    from calibration.spotcheck.manifest import read_manifest

    if manifest:
        found = ungraded_sample_warning(read_manifest(manifest), human)
    elif not args.no_manifest:
        found = unweighted_sample_warning(llm, human, args.human)
    else:
        found = None
    return [found] if found else []


def _doc_lengths(path: Path, ids: set[str]) -> dict[str, int]:
    from grader.io.docs import read_docs

    docs = read_docs(path, ids=ids)
    return {doc_id: len(doc.text) for doc_id, doc in docs.items()}


def _fit_lexical(args: argparse.Namespace) -> int:
    if args.queries is None or args.docs is None:
        raise InputError(
            "--fit-lexical needs --queries and --docs", hint="the texts the lexical judge scores"
        )
    from calibration.lexical_fit import fit_and_write

    result = fit_and_write(args.human, args.queries, args.docs, args.lexical_out, clamp=args.clamp)
    if args.format == "json":
        json.dump(result, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(f"lexical thresholds fitted on {result['n']} human-graded pairs:")
        for grade, value in zip((1, 2, 3), result["thresholds"], strict=True):
            print(f"  grade >= {grade} when score >= {value:.4f}")
        kappa = result["weighted_kappa_quadratic"]
        shown = "n/a" if kappa is None else f"{kappa:.4f}"
        print(f"quadratic-weighted kappa of the fitted grades with the human ones: {shown}")
        print(f"written to {result['path']}")
    return 0
