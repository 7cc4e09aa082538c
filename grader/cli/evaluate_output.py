"""What `relgrade evaluate` prints beside its mean table: the JSON and CSV records of every path;
`--baseline NAME`'s flags and comparisons (the table marks with `*` the means that differ at
p_adjusted < 0.05, `grader.evaluation.baseline`); `--fill LLM_QRELS`'s flags and its runs scored
three ways (`grader.evaluation.fill`)."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

from grader.errors import InputError
from grader.evaluation.baseline import COLUMNS, Comparisons, Options, baseline_name
from grader.evaluation.significance import CORRECTIONS, PERMUTATIONS, TESTS
from grader.io.runs import run_names

_DEFAULTS = {"test": "t", "permutations": PERMUTATIONS, "seed": 0, "correction": "holm"}


def add_flags(parser: argparse.ArgumentParser) -> None:
    """`--baseline NAME`, `--fill LLM_QRELS` and the flags that go with each."""
    parser.add_argument(
        "--baseline",
        metavar="NAME",
        help="compare every other run with this one (a run's name as printed, or its path): "
        "diff, p_value, p_adjusted, diff_ci_low, diff_ci_high per measure",
    )
    parser.add_argument(
        "--test",
        choices=TESTS,
        help="with --baseline: the paired two-sided test (default t)",
    )
    parser.add_argument(
        "--permutations",
        type=int,
        metavar="N",
        help=f"with --baseline: random sign flips (randomization; exact when 2^queries <= N) or "
        f"resamples (bootstrap, and randomization's interval) (default {PERMUTATIONS:,})",
    )
    parser.add_argument(
        "--seed", type=int, help="with --baseline: seed of the flips and resamples (default 0)"
    )
    parser.add_argument(
        "--correction",
        choices=CORRECTIONS,
        help="with --baseline: correction over every run x measure compared (default holm)",
    )
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


def options(args: argparse.Namespace) -> Options | None:
    """The comparison asked for, or None without --baseline (then its flags are refused)."""
    given = {k: getattr(args, k) for k in _DEFAULTS if getattr(args, k) is not None}
    if args.baseline is None:
        if given:
            flags = ", ".join(f"--{k}" for k in given)
            verb = "goes" if len(given) == 1 else "go"
            raise InputError(f"{flags} {verb} with --baseline NAME", hint="add --baseline NAME")
        return None
    values = {**_DEFAULTS, **given}
    if values["permutations"] < 1:
        raise InputError(f"--permutations must be at least 1, not {values['permutations']}")
    name = baseline_name(args.baseline, run_names(args.runs), list(args.runs), "--baseline ")
    return Options(name, **values)


def csv_fields(records: list[dict[str, Any]]) -> list[str]:
    """The CSV header: every key of the records, in the order they first appear (COLUMNS come
    with a baseline, after the keys every record has)."""
    fields = dict.fromkeys(["run", "query_id", "measure", "value"])
    for record in records:
        fields.update(dict.fromkeys(k for k in record if k not in COLUMNS))
    if any(COLUMNS[0] in record for record in records):
        fields.update(dict.fromkeys(COLUMNS))
    return list(fields)


def print_records(records: list[dict[str, Any]], fmt: str, fields: list[str]) -> None:
    """The records as JSON or CSV (`fields` its header) on stdout, a NaN value as null or ""
    (each format imports only its own module)."""
    for r in records:
        value = r["value"]
        r["value"] = None if isinstance(value, float) and math.isnan(value) else value
    if fmt == "json":
        import json

        print(json.dumps(records, indent=1))
        return
    import csv

    writer = csv.DictWriter(sys.stdout, fieldnames=fields, lineterminator="\n")
    writer.writeheader()
    for r in records:
        writer.writerow({**r, "value": "" if r["value"] is None else repr(r["value"])})


def mark(comparisons: Comparisons | None, run: str, measure: str) -> str:
    """ " *" after a mean that differs from the baseline's, else ""."""
    found = comparisons.get(run, measure) if comparisons else None
    return " *" if found and found.significant else ""


def table(title: str, columns: Any, left: tuple[str, ...] = ("run", "measure")) -> Any:
    """A rich table: `columns` right-justified but those in `left`."""
    from rich.table import Table

    made = Table(title=title, title_justify="left")
    for column in columns:
        made.add_column(column, justify="left" if column in left else "right")
    return made


def print_comparisons(console: Any, comparisons: Comparisons) -> None:
    """Per run, a table of its comparisons (measure, diff, interval, p-values); the legend."""
    for run in dict.fromkeys(c.run for c in comparisons.rows):
        shown = table(f"{run} - {comparisons.baseline} (baseline)", ())
        shown.add_column("measure", overflow="fold")
        for column in ("diff", "95% CI", "p_value", "p_adjusted"):
            shown.add_column(column, justify="right", no_wrap=True)
        for c in (c for c in comparisons.rows if c.run == run):
            interval = f"[{fmt(c.diff_ci_low)}, {fmt(c.diff_ci_high)}]"
            adjusted = _p(c.p_adjusted) + (" *" if c.significant else "  ")
            shown.add_row(c.measure, fmt(c.diff, "+.4f"), interval, _p(c.p_value), adjusted)
        console.print(shown)
    console.print(comparisons.legend(), soft_wrap=True)


def fmt(value: float, spec: str = ".4f") -> str:
    return "n/a" if math.isnan(value) else format(value, spec)


def _p(value: float) -> str:
    """A p-value to 4 decimals; below 0.0001 as "<0.0001" (JSON and CSV give it whole)."""
    return "<0.0001" if value < 1e-4 else fmt(value)


def run_fill(args: argparse.Namespace, comparison: Options | None = None) -> int:
    """`evaluate --fill`: each run scored three ways and who judged its top k; `comparison` is
    `--baseline`'s (`grader.evaluation.fill.evaluation`)."""
    from calibration.spotcheck import also_judged
    from grader.evaluation.fill.evaluation import BASELINE_COLUMNS
    from grader.evaluation.fill.evaluation import COLUMNS as FILL_COLUMNS
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
        fields = FILL_COLUMNS + (BASELINE_COLUMNS if comparison else [])
        print_records(records, args.format, fields)
    else:
        _print_fill(evaluation.result)
        if comparison is not None:
            _print_differences(records, comparison)
    for note in evaluation.warnings + evaluation.notes:
        print(note, file=sys.stderr)
    return 0


def _print_differences(records: list[dict[str, Any]], comparison: Options) -> None:
    """Each run's filled score against the baseline's: the paired test over queries, and the
    corrected difference (grader.evaluation.fill.evaluation)."""
    from rich.console import Console

    def cell(r: dict[str, Any], diff: str, low: str, high: str, p: str) -> str:
        if r.get(diff) is None:
            return "-"
        return f"{r[diff]:+.4f} [{r[low]:+.4f}, {r[high]:+.4f}] p={r[p]:.4f}"

    shown = table(
        f"filled: difference from the baseline {comparison.baseline}",
        ("run", "measure", "paired test (p adjusted)", "corrected [95%] (p)"),
    )
    for r in records:
        if r["query_id"] != "all" or r["regime"] != "filled" or "source" in r:
            continue
        if r["run"] == comparison.baseline:
            continue
        plain = cell(r, "diff", "diff_ci_low", "diff_ci_high", "p_adjusted")
        keys = ("diff", "diff_ci_low", "diff_ci_high", "p_value")
        corrected = cell(r, *(f"corrected_{k}" for k in keys))
        shown.add_row(r["run"], r["measure"], plain, corrected)
    Console(highlight=False, width=160).print(shown)


def _print_fill(result: Any) -> None:
    from rich.console import Console

    from grader.evaluation.fill.scores import REGIMES, SOURCES

    console = Console(highlight=False)
    shown = table(
        "mean over queries, three ways",
        ("run", "measure", *REGIMES, "filled, corrected [95% interval]"),
    )
    for run, regimes in result.scores.items():
        means = {regime: dict(regimes[regime].means()) for regime in REGIMES}
        for measure in result.measures:
            found = result.intervals.get(run, {}).get(measure)
            interval = f"{found.estimate:.4f} [{found.low:.4f}, {found.high:.4f}]" if found else "-"
            values = [f"{means[regime][measure]:.4f}" for regime in REGIMES]
            shown.add_row(run, measure, *values, interval)
    console.print(shown)
    shares = table(
        "who graded each run's top k", ("run", "k", "people", "LLM", "unjudged"), ("run",)
    )
    for run, counts in result.shares.items():
        k = "all" if counts.k is None else str(counts.k)
        shares.add_row(run, k, *(f"{counts.share(s):.1%}" for s in SOURCES))
    console.print(shares)
