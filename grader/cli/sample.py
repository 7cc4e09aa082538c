"""`relgrade sample`: draw a blind spot-check sample of LLM judgments, or import its grades back.

Draw: `relgrade sample --judgments J (--n N | --fraction F) --strategy S --queries Q --docs D
--out SAMPLE.csv` writes the blind CSV (no LLM grade, shuffled rows), `SAMPLE.manifest.json`
beside it (design and every pair's inclusion probability), and with `--labelstudio T.json`
Label Studio tasks. Only ok judgments are sampled; pairs in `--exclude` human grades are left out.

Import: `relgrade sample --import FILLED.csv|EXPORT.json|EXPORT.csv|EXPORT.tsv --out HUMAN.csv`
checks the grades against the sample's manifest and writes `HUMAN.csv` with `HUMAN.manifest.json`
beside it, which `relgrade calibrate` uses to weight the grades back to the whole set of judgments.
Label Studio exports are read in its JSON, JSON-MIN, CSV and TSV formats, the same way: a pair
graded by two people needs `--annotator` (one person's grades; import each person on their own),
one person's latest annotation of a pair counts, and the import says how many sampled pairs came
back graded, skipped (JSON only) and missing.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from calibration.spotcheck.annotate.scale import prompt_scale
from calibration.spotcheck.blind import (
    blind_items,
    read_filled_csv,
    write_blind_csv,
    write_human_grades,
)
from calibration.spotcheck.labelstudio import write_labelstudio_tasks
from calibration.spotcheck.labelstudio_import import (
    is_labelstudio_table,
    read_labelstudio_export,
)
from calibration.spotcheck.manifest import (
    Manifest,
    build_manifest,
    copy_manifest_beside,
    find_manifest,
    manifest_path_for,
    read_manifest,
    write_manifest,
)
from calibration.spotcheck.sampling import ALLOCATIONS, STRATEGIES, draw_sample
from calibration.spotcheck.sequential import UNIFORM_SHARE
from grader.cli.commands import COMMANDS
from grader.cli.flags import add_store
from grader.cli.sample_texts import prompt_budgets, sample_texts
from grader.errors import InputError, RelgradeError
from grader.models import Judgment


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "sample",
        help=COMMANDS["sample"],
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
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
    parser.add_argument("--out", required=True, help="SAMPLE.csv to write (import: HUMAN.csv)")
    parser.set_defaults(func=run)


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
    if args.import_file:
        return _import(args)
    if not args.judgments:
        raise InputError("--judgments is required to draw a sample", hint="or use --import FILE")
    if args.n is None and args.fraction is None:
        raise InputError("give --n N or --fraction F")
    return _draw(args)


def _excluded_pairs(paths: list[str]) -> set[tuple[str, str]]:
    from grader.io.grades import read_human_grades

    pairs: set[tuple[str, str]] = set()
    for path in paths:
        frame = read_human_grades(path, clamp=True)
        pairs.update(zip(frame["query_id"].astype(str), frame["doc_id"].astype(str), strict=True))
    return pairs


def _single(values: list[str | None]) -> str | None:
    distinct = {v for v in values if v is not None}
    return distinct.pop() if len(distinct) == 1 else None


def _population(path: str, strategy: str) -> list[Judgment]:
    """The judgments to sample from: a judgments JSONL as it is, or TREC qrels (as
    `calibrate --llm` takes them) read as ok judgments with a grade and nothing more."""
    from grader.io.files import iter_lines
    from grader.io.grades import looks_like_qrels

    first = next((line for _, line in iter_lines(path) if line.strip()), "")
    if not looks_like_qrels(first):
        from grader.io.judgments import read_judgments

        return read_judgments(path)
    if strategy == "uncertainty":
        raise InputError(
            "--strategy uncertainty needs each pair's uncertainty (logprob confidence or an "
            "ensemble's disagreement), and TREC qrels hold grades only",
            path=path,
            hint="give the judgments JSONL that `relgrade grade --out` wrote, or another "
            "--strategy (stratified, uniform, active, low, query-balanced, whole-queries)",
        )
    from grader.io.grades import read_llm_grades

    frame = read_llm_grades(path)
    judge = f"qrels:{Path(path).name}"
    return [
        Judgment(
            query_id=qid, doc_id=did, grade=int(grade), status="ok", judge=judge, key=f"{qid} {did}"
        )
        for qid, did, grade in zip(frame["query_id"], frame["doc_id"], frame["grade"], strict=True)
    ]


def _draw(args: argparse.Namespace) -> int:
    judgments = _population(args.judgments, args.strategy)
    ok = [j for j in judgments if j.status == "ok"]
    failed = len(judgments) - len(ok)
    graded = _excluded_pairs(args.exclude)
    eligible: list[Judgment] = [j for j in ok if (j.query_id, j.doc_id) not in graded]
    human = len(ok) - len(eligible)
    draw = draw_sample(
        eligible,
        strategy=args.strategy,
        n=args.n,
        fraction=args.fraction,
        allocation=args.allocation,
        seed=args.seed,
        low_share=args.low_share,
        floor=args.floor,
        uniform_share=args.uniform_share,
        threshold=args.threshold,
    )
    pairs = [(p.query_id, p.doc_id) for p in draw.pairs]
    queries, docs = sample_texts(args, pairs)
    budgets = prompt_budgets(args.prompt, eligible, set(pairs))
    items = blind_items(
        pairs, queries, docs, allow_missing_text=not (queries or docs), budgets=budgets
    )
    prompt = _single([str(j.prompt) if j.prompt else None for j in eligible])
    manifest = build_manifest(
        draw,
        source=args.judgments,
        prompt=prompt,
        judge=_single([j.judge for j in eligible]),
        excluded={"failed": failed, "human_graded": human},
    )
    write_blind_csv(args.out, items)
    manifest_path = manifest_path_for(args.out)
    write_manifest(manifest_path, manifest)
    print(
        f"sampled {len(pairs)} of {draw.population} eligible judgments "
        f"(strategy {draw.strategy}"
        + (f", {draw.allocation} allocation" if draw.allocation else "")
        + f", seed {draw.seed}); left out {failed} failed judgment(s) (no grade) and "
        f"{human} pair(s) people already graded"
    )
    counts = Counter(p.stratum for p in draw.pairs)
    if len(draw.strata) > 8:
        sizes = [int(info["size"]) for info in draw.strata.values()]
        each = (
            f"{min(sizes)} pairs each"
            if min(sizes) == max(sizes)
            else (f"{min(sizes)} to {max(sizes)} pairs")
        )
        print(f"  {len(draw.strata)} strata of {each}; pairs drawn from {len(counts)} of them")
    else:
        for name, info in draw.strata.items():
            line = f"  {name}: {counts.get(name, 0)} drawn of {int(info['size'])}"
            if draw.strategy not in ("uncertainty", "active"):
                line += f" (inclusion probability {info['expected'] / info['size']:.4g})"
            print(line)
    if draw.uncertainty_source:
        print(f"  uncertainty from {draw.uncertainty_source}", end="")
        if draw.uncertainty_imputed:
            print(f"; {draw.uncertainty_imputed} pair(s) lacked it and got the maximum", end="")
        print()
    if draw.strategy == "active":
        print(
            f"  drawn one at a time, the uncertain pairs more often ({draw.uniform_share:g} of "
            "each weight uniform); grade in the order given and stop when the annotation page "
            "says you may"
        )
    cut = sum(item.truncated for item in items)
    if cut:
        print(
            f"  {cut} document(s) cut to their prompt's budget, as the LLM saw them (column "
            "truncated)"
        )
    print(f"wrote {args.out} (blind: grade it with `relgrade annotate {args.out}`)")
    print(f"wrote {manifest_path} (for calibration; do not show it to graders)")
    if args.labelstudio:
        config = write_labelstudio_tasks(args.labelstudio, items, _scale(args.prompt or prompt))
        print(f"wrote {args.labelstudio} and its labeling config {config}")
    return 0


def _scale(prompt: str | None) -> list[tuple[int, str]] | None:
    if not prompt:
        return None
    try:
        return prompt_scale(prompt)
    except RelgradeError as exc:
        print(f"note: no scale meanings in the labeling config: {exc}", file=sys.stderr)
        return None


def _import_manifest(args: argparse.Namespace) -> Manifest:
    if args.manifest:
        return read_manifest(args.manifest)
    found = find_manifest(args.import_file)
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
            print(
                f"note: {result.regraded} pair(s) were graded more than once by the same person; "
                "the latest annotation counts",
                file=sys.stderr,
            )
        if not result.skips_visible and result.missing:
            print(
                f"note: {result.format} exports leave skipped tasks out, so the "
                f"{result.missing} pair(s) not graded are missing or skipped (the JSON export "
                "tells them apart)",
                file=sys.stderr,
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
    if Path(args.out).resolve() == Path(path).resolve():
        raise InputError("--out must differ from the imported file", path=args.out)
    write_human_grades(args.out, grades)
    beside = copy_manifest_beside(manifest, args.out)
    print(
        f"imported {len(grades)} of {len(manifest.pairs)} sampled pairs from {source} -> "
        f"{args.out} (manifest {beside.name} beside it, so calibrate weights by the sample design)"
    )
    print(f"  {counts}")
    return 0
