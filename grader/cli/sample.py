"""`relgrade sample`: draw a blind spot-check sample of LLM judgments, or import its grades back.

Draw: `--judgments J (--n N | --fraction F) --strategy S --out SAMPLE.csv` writes the blind CSV,
`SAMPLE.manifest.json` beside it and, with `--labelstudio`, Label Studio tasks.
Import: `--import FILLED.csv|EXPORT.json|.csv|.tsv --out HUMAN.csv` checks the grades against the
manifest and writes them with the manifest beside, for `calibrate`'s weights.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from calibration.spotcheck.blind import (
    prompt_scale,
    read_filled_csv,
    write_human_grades,
)
from calibration.spotcheck.labelstudio import (
    is_labelstudio_table,
    read_labelstudio_export,
    write_labelstudio_tasks,
)
from calibration.spotcheck.manifest import (
    Manifest,
    copy_manifest_beside,
    find_manifest,
    manifest_path_for,
    read_manifest,
)
from calibration.spotcheck.sampling import ALLOCATIONS, STRATEGIES
from calibration.spotcheck.sequential import UNIFORM_SHARE
from grader import defaults
from grader.cli.flags import add_command, add_store
from grader.cli.stderr import open_store, say
from grader.errors import InputError, RelgradeError
from grader.job.options import refuse_clashes
from grader.models import Doc, Query
from grader.prompts.files import prompt_budgets

DESIGN: tuple[str, ...] = ("strategy", "n", "fraction", "allocation", "seed", "low_share")
DESIGN += ("floor", "uniform_share", "threshold")
"""The flags of the draw's design, passed to `draw_blind_sample` by name."""


def register(sub: Any) -> None:
    parser = add_command(sub, "sample", __doc__)
    parser.add_argument(
        "--judgments",
        metavar="J",
        help="LLM grades to sample from: judgments JSONL or TREC qrels (qrels carry no "
        "confidence, so --strategy uncertainty needs judgments)",
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--n", type=int, help="number of pairs to draw")
    size.add_argument("--fraction", type=float, help="share of eligible pairs to draw (0..1]")
    parser.add_argument("--strategy", choices=STRATEGIES, default="stratified")
    parser.add_argument(
        "--allocation",
        choices=ALLOCATIONS,
        default="equal",
        help="stratified: same count per LLM grade (equal) or by grade share (proportional)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--low-share",
        type=float,
        default=0.8,
        help="low: share of the sample drawn from LLM grades 0-1 (default 0.8)",
    )
    parser.add_argument(
        "--floor",
        type=float,
        default=0.05,
        help="uncertainty: added to every pair's uncertainty so each can be drawn (default 0.05)",
    )
    _add_active_flags(parser)
    _add_text_flags(parser)
    _add_import_flags(parser)
    parser.add_argument("--out", required=True, help="SAMPLE.csv to write (import: HUMAN.csv)")
    parser.set_defaults(func=run)


def _add_text_flags(parser: Any) -> None:
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="HUMAN",
        help="human grades (CSV or qrels) whose pairs are left out; repeatable",
    )
    parser.add_argument("--queries", metavar="Q", help="queries file (texts for the sample)")
    parser.add_argument("--docs", metavar="D", help="docs file (texts for the sample)")
    add_store(parser, "store to take query and doc texts from, without --queries/--docs")
    parser.add_argument(
        "--labelstudio", metavar="TASKS.json", help="also write Label Studio tasks (and config)"
    )
    parser.add_argument(
        "--prompt",
        help="prompt the pairs were graded with: documents are cut to its budget as the LLM saw "
        "them, and its scale goes into the Label Studio config (default: each judgment's)",
    )


def _add_import_flags(parser: Any) -> None:
    parser.add_argument(
        "--import",
        dest="import_file",
        metavar="FILE",
        help="import a filled sample CSV, or a Label Studio export (JSON, JSON-MIN, CSV or TSV), "
        "as human grades",
    )
    parser.add_argument("--manifest", help="import: the sample's manifest (default: beside FILE)")
    parser.add_argument(
        "--allow-missing",
        action="store_true",
        help="import: import the graded pairs when some are not graded (skipped or missing)",
    )
    parser.add_argument(
        "--annotator",
        metavar="ID|EMAIL",
        help="import from Label Studio: keep this person's grades; matches the user id (a number: "
        "Label Studio 1.2x exports completed_by as one) or the email (when the export holds it). "
        "Needed when two people graded the same pair",
    )


def _add_active_flags(parser: Any) -> None:
    parser.add_argument(
        "--uniform-share",
        type=float,
        default=UNIFORM_SHARE,
        help="active: share of each pair's weight that is uniform, so no pair's chance falls "
        f"below this share of a uniform draw's (default {UNIFORM_SHARE})",
    )
    parser.add_argument(
        "--threshold",
        type=int,
        default=2,
        choices=(1, 2, 3),
        help="active: relevant = grade >= this, the estimand whose uncertainty drives the draw (2)",
    )


def run(args: argparse.Namespace) -> int:
    _refuse_clashes(args)
    if args.import_file:
        return _import(args)
    if not args.judgments:
        raise InputError("--judgments is required to draw a sample", hint="or use --import FILE")
    if args.n is None and args.fraction is None:
        raise InputError("give --n N or --fraction F")
    return _draw(args)


def _refuse_clashes(args: argparse.Namespace) -> None:
    """No output on an input, or on another output (a draw also writes the manifest beside
    --out)."""
    outputs: list[tuple[str, Any]] = [("--out", args.out), ("--labelstudio", args.labelstudio)]
    if not args.import_file:
        outputs.append(("--out's manifest", manifest_path_for(args.out)))
    refuse_clashes(
        [
            ("--judgments", args.judgments),
            ("--queries", args.queries),
            ("--docs", args.docs),
            ("--exclude", args.exclude),
            ("--import", args.import_file),
            ("--manifest", args.manifest),
            ("--store", args.store),
        ],
        outputs,
    )


def _excluded_pairs(paths: list[str]) -> set[tuple[str, str]]:
    from grader.io.grades import read_human_grades

    pairs: set[tuple[str, str]] = set()
    for path in paths:
        frame = read_human_grades(path, clamp=True)
        pairs.update(zip(frame["query_id"].astype(str), frame["doc_id"].astype(str), strict=True))
    return pairs


def _draw(args: argparse.Namespace) -> int:
    from calibration.spotcheck.draw import draw_blind_sample, read_population

    sample = draw_blind_sample(
        read_population(args.judgments, args.strategy),
        lambda pairs: sample_texts(args, pairs),
        source=args.judgments,
        excluded=_excluded_pairs(args.exclude),
        budgets=lambda eligible, pairs: prompt_budgets(args.prompt, eligible, pairs),
        **{name: getattr(args, name) for name in DESIGN},
    )
    manifest_path = sample.write(args.out)
    for line in sample.summary_lines():
        print(line)
    print(f"wrote {args.out} (blind: grade it with `relgrade annotate {args.out}`)")
    print(f"wrote {manifest_path} (for calibration; do not show it to graders)")
    if args.labelstudio:
        config = write_labelstudio_tasks(
            args.labelstudio, sample.items, _scale(args.prompt or sample.manifest.prompt)
        )
        print(f"wrote {args.labelstudio} and its labeling config {config}")
    return 0


def _scale(prompt: str | None) -> list[tuple[int, str]] | None:
    if not prompt:
        return None
    try:
        return prompt_scale(prompt)
    except RelgradeError as exc:
        say(f"note: no scale meanings in the labeling config: {exc}")
        return None


def _import_manifest(args: argparse.Namespace) -> Manifest:
    found = args.manifest or find_manifest(args.import_file)
    if found is None:
        raise InputError(
            f"no manifest beside the file ({manifest_path_for(args.import_file).name})",
            path=args.import_file,
            hint="pass --manifest SAMPLE.manifest.json of the sample these grades came from",
        )
    return read_manifest(found)


def _import(args: argparse.Namespace) -> int:
    manifest = _import_manifest(args)
    path = args.import_file
    name = Path(path).name.removesuffix(".gz").lower()
    source = "the filled sample"
    if name.endswith(".json") or is_labelstudio_table(path):
        result = read_labelstudio_export(
            path, manifest, annotator=args.annotator, allow_missing=args.allow_missing
        )
        grades = result.grades
        counts = result.counts()
        source = f"Label Studio's {result.format} export"
        if args.annotator:
            source += f", annotator {args.annotator} (of {len(result.annotators)} in it)"
        if result.regraded:
            say(
                f"note: {result.regraded} pair(s) were graded more than once by the same person; "
                "the latest annotation counts"
            )
        if not result.skips_visible and result.missing:
            say(
                f"note: {result.format} exports leave skipped tasks out, so the "
                f"{result.missing} pair(s) not graded are missing or skipped (the JSON export "
                "tells them apart)"
            )
    else:
        if args.annotator:
            raise InputError(
                "--annotator is for Label Studio exports; this file is not one",
                path=path,
                hint="a Label Studio CSV or TSV export has the columns annotation_id and annotator",
            )
        delimiter = "\t" if name.endswith(".tsv") else ","
        grades = read_filled_csv(
            path, manifest, allow_missing=args.allow_missing, delimiter=delimiter
        )
        counts = (
            f"graded {len(grades)}, missing {len(manifest.pairs) - len(grades)} "
            f"of the {len(manifest.pairs)} sampled pairs"
        )
    if not grades:
        raise InputError("no graded pair to import", path=path)
    write_human_grades(args.out, grades)
    beside = copy_manifest_beside(manifest, args.out)
    print(
        f"imported {len(grades)} of {len(manifest.pairs)} sampled pairs from {source} -> "
        f"{args.out} (manifest {beside.name} beside it, so calibrate weights by the sample design)"
    )
    print(f"  {counts}")
    return 0


def sample_texts(
    args: argparse.Namespace, pairs: list[tuple[str, str]]
) -> tuple[dict[str, Query], dict[str, Doc]]:
    """Query and document texts for the sample: --queries/--docs, else --store, else the default
    store of `relgrade grade` (./relgrade.db) when present. With none of them the sample is still
    drawn (ids only) and a warning says how to add the texts."""
    dids = {d for _, d in pairs}
    if args.queries or args.docs:
        if not (args.queries and args.docs):
            raise InputError(
                "--queries and --docs go together",
                hint="pass both (or --store DB, which keeps the texts graded)",
            )
        from grader.io.docs import read_docs, read_queries

        return read_queries(args.queries), read_docs(args.docs, ids=dids)
    if args.store == defaults.STORE:
        if not Path(args.store).is_file():
            say(
                "warning: no texts for the sample (ids only): pass --queries Q --docs D or --store"
                " DB so that people see the query and document"
            )
            return {}, {}
        say(f"texts taken from the store {defaults.STORE}")
    with open_store(args.store, "grade") as store:
        return store.queries({q for q, _ in pairs}), store.docs(dids)
