"""`relgrade calibrate`: how far to trust LLM grades, measured against human grades.

Prints agreement (kappas, alpha, confusion, bias, per-query figures with query-bootstrap
intervals), bias by length and rank, system-ranking agreement with `--run`, PPI++ estimates when
people graded only part of the LLM-graded pairs, and an HTML report with `--report`.
`--fit-lexical` instead fits the offline judge's thresholds on the human grades.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from grader.cli.flags import add_command, add_measures, add_runs
from grader.cli.stderr import say
from grader.errors import InputError
from grader.job.options import refuse_clashes

KEYWORDS: tuple[str, ...] = ("second_human", "docs", "clamp", "judge", "manifest")
KEYWORDS += ("no_manifest", "human_scale", "measures", "seed", "bootstrap", "threshold")
"""The flags passed to `calibrate_grades` by their names."""


def register(sub: Any) -> None:
    p = add_command(sub, "calibrate", __doc__)
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
    p.add_argument("--format", choices=("table", "json"), default="table")
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


def run(args: argparse.Namespace) -> int:
    refuse_clashes(
        [
            ("--llm", args.llm),
            ("--human", args.human),
            ("--second-human", args.second_human),
            ("--docs", args.docs),
            ("--queries", args.queries),
            ("--manifest", args.manifest),
            ("--run", args.run),
        ],
        [("--report", args.report), ("--lexical-out", args.lexical_out)],
    )
    if args.fit_lexical:
        return _fit_lexical(args)
    if not args.llm:
        raise InputError("--llm is required", hint="give the LLM grades (judgments or qrels)")
    from calibration.calibrate import calibrate_grades

    given = {name: getattr(args, name) for name in KEYWORDS}
    summary = calibrate_grades(args.llm, args.human, runs=args.run, **given)
    for warning in summary.warnings:
        say(f"warning: {warning}")
    _write(args, summary)
    return 0


def _write(args: argparse.Namespace, summary: Any) -> None:
    """The report (--report), then the summary on stdout as JSON or tables."""
    if args.report:
        from calibration.report.html import write_report

        write_report(args.report, summary)
    if args.format == "json":
        print(json.dumps(summary.to_json(), indent=2, allow_nan=False))
    else:
        from rich.console import Console

        from calibration.report.terminal import render

        console = Console()
        console.print(render(summary))
        if args.report:
            console.print(f"report written to {args.report}", soft_wrap=True, highlight=False)


def _fit_lexical(args: argparse.Namespace) -> int:
    if args.queries is None or args.docs is None:
        raise InputError(
            "--fit-lexical needs --queries and --docs", hint="the texts the lexical judge scores"
        )
    from calibration.lexical_fit import fit_and_write

    result = fit_and_write(args.human, args.queries, args.docs, args.lexical_out, clamp=args.clamp)
    if args.format == "json":
        print(json.dumps(result, indent=2))
    else:
        print(f"lexical thresholds fitted on {result['n']} human-graded pairs:")
        for grade, value in zip((1, 2, 3), result["thresholds"], strict=True):
            print(f"  grade >= {grade} when score >= {value:.4f}")
        kappa = result["weighted_kappa_quadratic"]
        shown = "n/a" if kappa is None else f"{kappa:.4f}"
        print(f"quadratic-weighted kappa of the fitted grades with the human ones: {shown}")
        print(f"written to {result['path']}")
    return 0
