"""`relgrade evaluate --fill LLM_QRELS HUMAN_QRELS RUN ...`: each run scored three ways side by
side (holes as non-relevant, judged only, holes filled by the LLM), and how much of its top k
people judged, the LLM filled, and nobody graded. The numbers are `grader.metrics.fill`'s.

JSON: the records of `evaluate --format json` ({"run", "query_id", "measure", "value"}) with a
`regime` ("holes_nonrelevant", "judged_only", "filled"); the filled means with an interval add
`corrected`, `ci_low`, `ci_high`; the shares are records with measure `Share@k` (`Share` for
the whole ranking), regime "filled" and `source` ("human", "llm", "unjudged").
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from grader.errors import InputError
from grader.metrics.fill import REGIMES, SOURCES, FillResult, evaluate_fill


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
        help="with --fill: the also-judged manifest (default: <LLM_QRELS stem>.manifest.json)",
    )


def _weights(args: argparse.Namespace) -> tuple[dict[tuple[str, str], float] | None, str]:
    """1/pi of each also-judged pair from the manifest beside LLM_QRELS (or given)."""
    from calibration.spotcheck.also_judged import is_also_judged
    from calibration.spotcheck.manifest import find_manifest, read_manifest

    path = args.fill_manifest or find_manifest(args.fill)
    if path is None:
        return None, ""
    manifest = read_manifest(path)
    if not is_also_judged(manifest) and args.fill_manifest is None:
        return None, ""
    return {k: 1.0 / p for k, p in manifest.probabilities().items()}, str(path)


def read_inputs(args: argparse.Namespace) -> tuple[Any, Any, dict[int, int] | None]:
    """People's qrels (any integer grade), the LLM's grades (0..3), the scale map."""
    from grader.grading.holes import parse_llm_scale, read_people_grades
    from grader.io.grades import read_llm_grades

    human = read_people_grades(args.qrels)
    llm = read_llm_grades(args.fill)[["query_id", "doc_id", "grade"]]
    scale = parse_llm_scale(args.llm_scale) if args.llm_scale else None
    if not set(llm["query_id"].astype(str)) & set(human["query_id"].astype(str)):
        raise InputError(
            f"the LLM's grades ({args.fill}) share no query id with people's qrels: are they "
            "for another collection?",
            path=args.qrels,
            hint="give the qrels and the LLM grades of the same collection",
        )
    return human, llm, scale


def run_fill(args: argparse.Namespace, given: list[str]) -> int:
    """The `evaluate --fill` command (see the module docstring)."""
    from grader.io.runs import run_names
    from grader.io.trec import read_run
    from grader.metrics.thresholds import resolve_thresholds

    if "-" in args.runs:
        raise InputError("--fill reads each RUN from a file, not stdin (-)", hint="save it first")
    human, llm, scale = read_inputs(args)
    top = int(max(human["grade"].max(), max((scale or {3: 3}).values())))
    measures, notes = resolve_thresholds(given, top, typed=bool(args.measures))
    runs = {
        name: read_run(path, precision=args.precision)
        for name, path in zip(run_names(args.runs), args.runs, strict=True)
    }
    weights, manifest = _weights(args)
    result = evaluate_fill(
        human,
        llm,
        runs,
        measures,
        scale=scale,
        missing="skip" if args.skip_missing else "zero",
        precision=args.precision,
        weights=weights,
    )
    notes += _notes(result, manifest, scale)
    records = fill_records(result, args.per_query)
    if args.format == "json":
        json.dump(records, sys.stdout, indent=1)
        sys.stdout.write("\n")
    elif args.format == "csv":
        import csv

        fields = ["run", "query_id", "measure", "regime", "source", "value"]
        fields += ["corrected", "ci_low", "ci_high"]
        writer = csv.DictWriter(sys.stdout, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(records)
    else:
        _print_table(result)
    for note in notes:
        print(note, file=sys.stderr)
    return 0


def _notes(result: FillResult, manifest: str, scale: dict[int, int] | None) -> list[str]:
    notes = [
        f"filled: {result.holes:,} LLM grades on pairs people did not judge; "
        f"{result.overlap:,} pairs graded by both"
    ]
    if scale is not None:
        from grader.grading.holes import scale_text

        notes.append(f"LLM grades mapped by --llm-scale {scale_text(scale)}")
    if result.interval_note:
        notes.append(result.interval_note)
        if manifest:
            notes.append(f"the pairs graded by both are weighted by 1/pi from {manifest}")
    elif result.overlap <= 1:
        notes.append(
            "no interval for the filled score: the LLM graded no pair people judged "
            "(grade --also-judged N gives some)"
        )
    return notes


def _clean(value: Any) -> Any:
    return None if isinstance(value, float) and math.isnan(value) else value


def fill_records(result: FillResult, per_query: bool = False) -> list[dict[str, Any]]:
    """The JSON records: scores by regime, then the shares by source."""
    frame = result.frame(per_query)
    records: list[dict[str, Any]] = []
    for row in frame.to_dict(orient="records"):
        record = {str(k): v for k, v in row.items() if k == "value" or _clean(v) is not None}
        record["value"] = _clean(row["value"])
        records.append(record)
    for run, shares in result.shares.items():
        measure = "Share" if shares.k is None else f"Share@{shares.k}"
        for source in SOURCES:
            records.append(
                {
                    "run": run,
                    "query_id": "all",
                    "measure": measure,
                    "regime": "filled",
                    "source": source,
                    "value": _clean(shares.share(source)),
                }
            )
    return records


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
