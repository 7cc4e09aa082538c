"""`relgrade evaluate HUMAN_QRELS RUN ... --fill LLM_QRELS`: each run scored three ways and who
judged its top k (`grader.evaluation.fill`), printed as a table, CSV or JSON.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from grader.evaluation.baseline import Options
from grader.evaluation.fill.evaluation import BASELINE_COLUMNS, COLUMNS
from grader.evaluation.fill.scores import REGIMES, SOURCES, FillResult


def add_flags(parser: argparse.ArgumentParser) -> None:
    """`--fill LLM_QRELS` and what goes with it."""
    parser.add_argument(
        "--fill",
        metavar="LLM_QRELS",
        help="the LLM's grades (qrels, or grade's judgments JSONL): QRELS are people's; each "
        "run is scored with holes as non-relevant, judged only, and holes filled by the LLM",
    )
    parser.add_argument(
        "--llm-scale",
        metavar="MAP",
        help="with --fill: LLM grade -> qrels grade, e.g. 0:0,1:1,2:4,3:7 (default identity)",
    )
    parser.add_argument(
        "--fill-manifest",
        type=Path,
        help="with --fill: the also-judged manifest (default: <LLM_QRELS stem>.manifest.json), "
        "or a relgrade sample manifest of holes people graded (their grades in QRELS)",
    )


def run_fill(args: argparse.Namespace, comparison: Options | None = None) -> int:
    """The `evaluate --fill` command (see the module docstring); `comparison` is
    `--baseline`'s (`grader.evaluation.fill.evaluation`)."""
    from calibration.spotcheck import also_judged
    from grader.job.fill import evaluate_fill

    evaluation = evaluate_fill(
        args.qrels,
        args.runs,
        args.fill,
        args.measures,
        also_judged=also_judged,
        llm_scale=args.llm_scale or None,
        fill_manifest=args.fill_manifest,
        skip_missing=args.skip_missing,
        precision=args.precision,
        comparison=(lambda names: comparison) if comparison else None,
        trec_eval_level=args.trec_eval_level,
        stdin=True,
    )
    records = evaluation.records(args.per_query)
    if args.format != "table":
        from grader.cli.evaluate_baseline import print_records

        print_records(records, args.format, COLUMNS + (BASELINE_COLUMNS if comparison else []))
    else:
        _print_table(evaluation.result)
        if comparison is not None:
            _print_differences(records, comparison)
    for note in evaluation.warnings + evaluation.notes:
        print(note, file=sys.stderr)
    return 0


def _print_differences(records: list[dict[str, Any]], comparison: Options) -> None:
    """Each run's filled score against the baseline's: the paired test over queries, and the
    corrected difference (grader.evaluation.fill.evaluation)."""
    from rich.console import Console
    from rich.table import Table

    def cell(diff: Any, low: Any, high: Any, p: Any) -> str:
        if diff is None:
            return "-"
        return f"{diff:+.4f} [{low:+.4f}, {high:+.4f}] p={p:.4f}"

    title = f"filled: difference from the baseline {comparison.baseline}"
    table = Table(title=title, title_justify="left")
    for column in ("run", "measure", "paired test (p adjusted)", "corrected [95%] (p)"):
        table.add_column(column, justify="left" if column in ("run", "measure") else "right")
    for r in records:
        if r["query_id"] != "all" or r["regime"] != "filled" or "source" in r:
            continue
        if r["run"] == comparison.baseline:
            continue
        plain = cell(
            r.get("diff"), r.get("diff_ci_low"), r.get("diff_ci_high"), r.get("p_adjusted")
        )
        corrected = cell(
            r.get("corrected_diff"),
            r.get("corrected_diff_ci_low"),
            r.get("corrected_diff_ci_high"),
            r.get("corrected_p_value"),
        )
        table.add_row(r["run"], r["measure"], plain, corrected)
    Console(highlight=False, width=160).print(table)


def _print_table(result: FillResult) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    table = Table(title="mean over queries, three ways", title_justify="left")
    for column in ("run", "measure", *REGIMES, "filled, corrected [95% interval]"):
        table.add_column(column, justify="left" if column in ("run", "measure") else "right")
    for run, regimes in result.scores.items():
        means = {regime: dict(regimes[regime].means()) for regime in REGIMES}
        for measure in result.measures:
            found = result.intervals.get(run, {}).get(measure)
            interval = f"{found.estimate:.4f} [{found.low:.4f}, {found.high:.4f}]" if found else "-"
            values = [f"{means[regime][measure]:.4f}" for regime in REGIMES]
            table.add_row(run, measure, *values, interval)
    console.print(table)
    shares = Table(title="who graded each run's top k", title_justify="left")
    for column in ("run", "k", "people", "LLM", "unjudged"):
        shares.add_column(column, justify="left" if column == "run" else "right")
    for run, counts in result.shares.items():
        k = "all" if counts.k is None else str(counts.k)
        cells = [f"{counts.share(s):.1%}" for s in SOURCES]
        shares.add_row(run, k, *cells)
    console.print(shares)
