"""`relgrade evaluate QRELS RUN [RUN ...]`: score runs against qrels, side by side.

Numbers agree with trec_eval to 1e-9. Output: a table (default), or the long tidy shape as CSV
or JSON: records {"run", "query_id", "measure", "value"}, query_id "all" for the mean.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
from pathlib import Path
from typing import Any

import pandas as pd

from grader.cli.commands import COMMANDS
from grader.io.files import iter_lines
from grader.io.trec import read_qrels, read_run
from grader.metrics import DEFAULT_MEASURES, evaluate, mean_scores, parse_measures
from grader.metrics.evaluate import Missing
from grader.metrics.measures import DEFAULT_THRESHOLD, SUMMED, parse_measure

EPILOG = f"""\
measures (ir_measures names; -m takes several, e.g. -m nDCG@10 "RR(rel=3)@10" AP):
  nDCG@k            normalised DCG, linear gain (the grade); nDCG(gain=exp)@k uses 2^grade-1.
                    The ideal ranking is built from ALL judged grades of the query, not from the
                    returned list, so missing relevant documents lower it. No threshold.
  RR(rel=N)@k       reciprocal rank of the first relevant result (mean over queries = MRR)
  P(rel=N)@k        relevant results in the top k / k (always divided by k)
  R(rel=N)@k        relevant results in the top k / relevant judged documents of the query
  AP(rel=N)[@k]     average precision (trec_eval map / map_cut_k)
  Rprec(rel=N)      precision at rank R = number of relevant judged documents
  Success(rel=N)@k  1 if any of the top k is relevant
  Judged@k          share of the top k that has any grade (where labels are still missing)
  ERR@k             expected reciprocal rank, gdeval's (ir_measures'): stop probability
                    (2^grade-1)/16 per result; not normalised. No threshold.
  Bpref(rel=N)      judged relevant before judged non-relevant; unjudged results are skipped
  NumRet            results returned; NumRel(rel=N) relevant judged documents of the query;
  NumRelRet(rel=N)  relevant results returned (ir_measures' NumRet(rel=N)). These three counts
                    are SUMMED over queries in the "all" row (trec_eval, ir_measures).
  Without @k, RR, R, AP, nDCG, ERR and Judged look at the whole ranking.

ir_measures spellings (same meaning as there):
  nDCG(dcg='exp-log2')@k          = nDCG(gain=exp)@k, and printed that way
  nDCG(gains={{0:0,1:1,2:3,3:7}})@k custom gain per grade; a grade left out keeps its grade as
                                  gain; printed without the g:g entries, nDCG(gains={{2:3,3:7}})@k
  judged_only=True                on nDCG, RR, P, R, AP, Rprec, Success: score the condensed
                                  list (unjudged results removed first; trec_eval -J), e.g.
                                  "P(rel=2,judged_only=True)@10". For incomplete (LLM) labels,
                                  beside Judged@k.

thresholds:
  A result is relevant when its grade >= N. N defaults to {DEFAULT_THRESHOLD} for 0..3 grades
  (TREC DL convention: 2 = highly relevant); write (rel=1) or (rel=3) to change it. Output names
  always show the threshold: RR@10 is printed RR(rel={DEFAULT_THRESHOLD})@10. Unjudged results
  are not relevant. Plain trec_eval uses -l 1: write (rel=1) to reproduce its numbers
  (nDCG ignores the threshold in both).

queries:
  Every query in QRELS counts; one a run does not answer scores 0 on every measure
  (trec_eval -c). --trec-eval-missing averages over answered queries only (trec_eval's
  default). Run queries absent from QRELS are ignored. Ranking follows trec_eval: score
  descending, ties by doc id descending, scores compared in float32 (--precision float64 for
  trec_eval 10); the file's rank column is ignored.

default measures: {" ".join(DEFAULT_MEASURES)}
"""


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "evaluate",
        help=COMMANDS["evaluate"],
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "qrels",
        metavar="QRELS",
        help="TREC qrels (qid iter docid grade), a grades CSV (query_id,doc_id,grade), or a "
        "judgments JSONL from `relgrade grade` (ok judgments; failed ones stay unjudged); .gz ok",
    )
    parser.add_argument(
        "runs", metavar="RUN", nargs="+", help="TREC run(s) (qid Q0 docid rank score tag)"
    )
    parser.add_argument(
        "-m",
        "--measure",
        dest="measures",
        metavar="MEASURE",
        nargs="+",
        action="extend",
        help="measures to compute (see below; default: the list at the end)",
    )
    parser.add_argument("--per-query", action="store_true", help="also print each query's values")
    parser.add_argument("--format", choices=("table", "csv", "json"), default="table")
    parser.add_argument(
        "--trec-eval-missing",
        "--skip-missing",
        dest="skip_missing",
        action="store_true",
        help="leave queries a run does not answer out of its mean (trec_eval's default) "
        "instead of scoring them 0",
    )
    parser.add_argument(
        "--precision",
        choices=("float32", "float64"),
        default="float32",
        help="precision in which scores are compared for ties (default float32, as trec_eval 9)",
    )
    parser.add_argument(
        "--clamp",
        action="store_true",
        help="move qrels grades outside 0..3 to the nearest of 0 and 3 instead of failing",
    )
    parser.set_defaults(func=run)


def run_names(paths: list[str]) -> list[str]:
    """Each run's name: the file stem (without .gz). Stems that repeat get their folder
    prepended (`a/run`, `b/run`), or, in the same folder, the whole file name (`r.txt`,
    `r.txt.gz`); the very same file twice gets a prime."""
    stems = []
    for text in paths:
        p = Path(text)
        name = p.name.removesuffix(".gz")
        stems.append(Path(name).stem or name)
    names = []
    for text, stem in zip(paths, stems, strict=True):
        parent = Path(text).parent.name
        if stems.count(stem) == 1:
            name = stem
        elif parent and [Path(t).parent.name for t in paths].count(parent) == 1:
            name = f"{parent}/{stem}"
        else:
            name = Path(text).name
        while name in names:
            name += "'"
        names.append(name)
    return names


def _records(name: str, per_query: pd.DataFrame, with_queries: bool) -> list[dict[str, Any]]:
    means = mean_scores(per_query)
    rows: list[dict[str, Any]] = []
    if with_queries:
        for qid, measure, value in per_query.itertuples(index=False):
            rows.append({"run": name, "query_id": qid, "measure": measure, "value": value})
    for measure, value in means.itertuples(index=False):
        rows.append({"run": name, "query_id": "all", "measure": measure, "value": value})
    counts = {m for m in means["measure"] if _is_count(m)}
    for row in rows:
        if row["measure"] in counts and not math.isnan(row["value"]):
            row["value"] = int(row["value"])  # counts print as trec_eval prints them
    return rows


def _is_count(measure: str) -> bool:
    """NumRet, NumRel, NumRelRet: whole numbers, summed (not averaged) in the "all" row."""
    return parse_measure(measure).name in SUMMED


def _note(name: str, per_query: pd.DataFrame, skip: bool) -> str:
    missing = len(per_query.attrs["missing"])
    total = per_query.attrs["qrels_queries"]
    text = f"{name}: answers {total - missing} of {total} qrels queries"
    if missing:
        text += (
            f"; {missing} left out of the mean (--trec-eval-missing)"
            if skip
            else f"; {missing} missing scored 0 and counted in the mean"
        )
    strays = len(per_query.attrs["unjudged_queries"])
    if strays:
        text += f"; {strays} run {'query' if strays == 1 else 'queries'} not in the qrels ignored"
    return text


def _clean(value: float) -> float | None:
    return None if math.isnan(value) else value


def read_grades(path: str, *, clamp: bool) -> pd.DataFrame:
    """TREC qrels (the fast reader), a judgments JSONL, or a human-grades CSV, told apart by the
    first line."""
    for _, line in iter_lines(path):
        if line.strip():
            if line.lstrip().startswith("{"):
                from grader.io.grades import read_llm_grades

                return read_llm_grades(path, clamp=clamp)
            from grader.io.grades import looks_like_qrels, read_human_grades

            if not looks_like_qrels(line):
                return read_human_grades(path, clamp=clamp)
            break
    return read_qrels(path, clamp=clamp)


def run(args: argparse.Namespace) -> int:
    measures = parse_measures(args.measures or list(DEFAULT_MEASURES))
    names = [str(m) for m in measures]
    qrels = read_grades(args.qrels, clamp=args.clamp)
    missing: Missing = "skip" if args.skip_missing else "zero"
    results: list[tuple[str, pd.DataFrame]] = []
    for name, path in zip(run_names(args.runs), args.runs, strict=True):
        frame = read_run(path, precision=args.precision)
        results.append((name, evaluate(qrels, frame, measures, missing=missing)))
    notes = [_note(name, pq, args.skip_missing) for name, pq in results]
    if qrels.attrs.get("clamped"):
        notes.append(f"{qrels.attrs['clamped']} grades outside 0..3 were clamped (--clamp)")
    if qrels.attrs.get("ungraded"):
        notes.append(
            f"{qrels.attrs['ungraded']} rows with an empty grade were left out (unjudged, not 0)"
        )
    if qrels.attrs.get("failed"):
        notes.append(
            f"{qrels.attrs['failed']} failed judgments left unjudged (not relevant, no gain; "
            "Judged@k shows where)"
        )
    records = [r for name, pq in results for r in _records(name, pq, args.per_query)]
    if args.format == "json":
        for r in records:
            r["value"] = _clean(r["value"])
        json.dump(records, sys.stdout, indent=1)
        sys.stdout.write("\n")
        _print_notes(notes, sys.stderr)
    elif args.format == "csv":
        writer = csv.DictWriter(
            sys.stdout, fieldnames=["run", "query_id", "measure", "value"], lineterminator="\n"
        )
        writer.writeheader()
        for r in records:
            writer.writerow({**r, "value": "" if math.isnan(r["value"]) else repr(r["value"])})
        _print_notes(notes, sys.stderr)
    else:
        _print_tables(results, names, notes, args.per_query)
    return 0


def _print_notes(notes: list[str], stream: Any) -> None:
    for note in notes:
        print(note, file=stream)


def _fmt(value: float, count: bool = False) -> str:
    return "n/a" if math.isnan(value) else f"{value:.0f}" if count else f"{value:.4f}"


def _print_tables(
    results: list[tuple[str, pd.DataFrame]], names: list[str], notes: list[str], per_query: bool
) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    counts = {m for m in names if _is_count(m)}
    if per_query:
        for name, pq in results:
            table = Table(title=f"{name}: per query", title_justify="left")
            table.add_column("query")
            for m in names:
                table.add_column(m, justify="right")
            wide = pq.pivot(index="query_id", columns="measure", values="value")
            wide = wide.reindex(index=list(dict.fromkeys(pq["query_id"])), columns=names)
            for qid, row in wide.iterrows():
                table.add_row(str(qid), *(_fmt(float(v), m in counts) for m, v in row.items()))
            console.print(table)
    table = Table(title="mean over queries", title_justify="left")
    table.add_column("measure")
    for name, _ in results:
        table.add_column(name, justify="right")
    means = [mean_scores(pq).set_index("measure")["value"] for _, pq in results]
    for m in names:
        table.add_row(m, *(_fmt(float(col[m]), m in counts) for col in means))
    console.print(table)
    if counts:
        listed = ", ".join(m for m in names if m in counts)
        console.print(f"{listed}: summed over queries, not averaged (as trec_eval)", soft_wrap=True)
    for note in notes:
        console.print(note, soft_wrap=True)
