"""`relgrade evaluate QRELS RUN... --baseline NAME`: the flags and the printing of
`grader.evaluation.baseline`'s comparisons (the table marks with `*` means that differ at
p_adjusted < 0.05), and the JSON and CSV records of every evaluate path.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from grader.errors import InputError
from grader.evaluation.baseline import COLUMNS, Comparisons, Options, baseline_name
from grader.evaluation.significance import CORRECTIONS, PERMUTATIONS, TESTS
from grader.io.runs import run_names

_DEFAULTS = {"test": "t", "permutations": PERMUTATIONS, "seed": 0, "correction": "holm"}


def add_flags(parser: argparse.ArgumentParser) -> None:
    """`--baseline NAME` and the flags that go with it."""
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

        json.dump(records, sys.stdout, indent=1)
        sys.stdout.write("\n")
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


def print_comparisons(console: Any, comparisons: Comparisons) -> None:
    """Per run, a table of its comparisons (measure, diff, interval, p-values); the legend."""
    from rich.table import Table

    runs = list(dict.fromkeys(c.run for c in comparisons.rows))
    for run in runs:
        title = f"{run} - {comparisons.baseline} (baseline)"
        table = Table(title=title, title_justify="left")
        table.add_column("measure", overflow="fold")
        for column in ("diff", "95% CI", "p_value", "p_adjusted"):
            table.add_column(column, justify="right", no_wrap=True)
        for c in (c for c in comparisons.rows if c.run == run):
            interval = f"[{_fmt(c.diff_ci_low)}, {_fmt(c.diff_ci_high)}]"
            adjusted = _p(c.p_adjusted) + (" *" if c.significant else "  ")
            table.add_row(c.measure, _fmt(c.diff, signed=True), interval, _p(c.p_value), adjusted)
        console.print(table)
    console.print(comparisons.legend(), soft_wrap=True)


def _fmt(value: float, signed: bool = False) -> str:
    return "n/a" if math.isnan(value) else f"{value:+.4f}" if signed else f"{value:.4f}"


def _p(value: float) -> str:
    """A p-value to 4 decimals; below 0.0001 as "<0.0001" (JSON and CSV give it whole)."""
    if math.isnan(value):
        return "n/a"
    return f"{value:.4f}" if value >= 1e-4 else "<0.0001"
