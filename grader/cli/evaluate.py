"""`relgrade evaluate QRELS RUN [RUN ...]`: score runs against qrels, side by side.

Numbers agree with trec_eval to 1e-9. Output: a table (default), or the long tidy shape as CSV
or JSON: records {"run", "query_id", "measure", "value"}, query_id "all" for the mean.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from grader.cli import evaluate_output as output
from grader.cli.flags import add_command, add_measures
from grader.errors import InputError
from grader.evaluation.baseline import Comparisons, compare
from grader.evaluation.files import path_join, read_grades
from grader.evaluation.scoring import RunJoin, check_measures, evaluate_judged
from grader.io.runs import run_names
from grader.metrics import DEFAULT_MEASURES, registry
from grader.metrics.evaluate import Missing, Scores
from grader.metrics.measures import is_summed as is_count

# pyarrow, pandas, rich and pydantic are imported only where a path needs them (a large run, a
# judgments JSONL or a grades CSV, the table): `relgrade evaluate` of small TREC files starts
# and scores in a fraction of a second (see grader/evaluation/files.py).


def epilog() -> str:
    """The help's text after the flags: the measures registered (built-in and plug-ins')."""
    known = registry.registered()
    return EPILOG.format(
        measures=registry.help_lines(),
        optional=", ".join(d.name for d in known if d.cutoff == "optional"),
        condensed=", ".join(d.name for d in known if d.judged_only),
        defaults=" ".join(DEFAULT_MEASURES),
    )


EPILOG = """\
measures (ir_measures names; -m takes several: -m nDCG@10 "RR(rel=3)@10" AP, or -m A -m B;
put -m after QRELS RUN..., or end its list with --, since it takes every word that follows):
{measures}
  Without @k, {optional} look at the whole ranking.

ir_measures spellings (same meaning as there):
  nDCG(dcg='exp-log2')@k          = nDCG(gain=exp)@k, and printed that way
  nDCG(gains={{0:0,1:1,2:3,3:7}})@k custom gain per grade; a grade left out keeps its grade as
                                  gain; printed without the g:g entries, nDCG(gains={{2:3,3:7}})@k
  judged_only=True                on {condensed}: score the condensed
                                  list (unjudged results removed first; trec_eval -J), e.g.
                                  "P(rel=2,judged_only=True)@10". For incomplete (LLM) labels,
                                  beside Judged@k.

thresholds:
  A result is relevant when its grade >= N. Without (rel=N), N comes from QRELS: 2 when a
  grade reaches 2 (TREC DL convention: 2 = highly relevant), 1 when the qrels are binary (0/1,
  as MS MARCO and BEIR; said on stderr). Output names always show the threshold: RR@10 is
  printed RR(rel=2)@10 or RR(rel=1)@10. ir_measures and plain trec_eval (-l 1) read a bare
  RR@10 as rel=1 whatever the grades: on graded qrels write (rel=1) to reproduce their numbers
  (stderr reminds you). A threshold above every grade of QRELS is said on stderr (no query has
  a relevant document then). Unjudged results are not relevant; nDCG ignores the threshold.
  trec_eval's names (P_10, map, recip_rank, ndcg_cut_10, recall_100, Rprec, success_10,
  bpref ...) mean what trec_eval computes at its level: 1, or --trec-eval-level N (its -l);
  printed with the threshold (P(rel=1)@10), JSON/CSV keep the name typed in "requested".
  A measure looking where more than 10% is unjudged gets a caution ("judged_share" in JSON).

grades:
  A TREC qrels grade is any integer, as trec_eval takes it (TREC Web's -2..4, MS MARCO's 0/1):
  relevant when grade >= N; nDCG's gain is the grade, and a grade <= 0 gains 0 (trec_eval's
  default gains; gain=exp too, where 2^grade-1 would be negative). A judgments JSONL or a grades
  CSV holds LLM or human grades: 0..3, or --clamp.

files:
  Run lines may have more than six columns (the rest is ignored) and `#` lines are comments in
  runs and qrels, as trec_eval 10 reads them; a line with fewer columns is an error naming file
  and line. RUN `-` reads a run from stdin (named "stdin"). QRELS without judgments is an
  error; an empty run, or one answering no qrels query, is a warning on stderr.

queries:
  Every query in QRELS counts; one a run does not answer scores 0 on every measure
  (trec_eval -c). --trec-eval-missing averages over answered queries only (trec_eval's
  default). Run queries absent from QRELS are ignored. Ranking follows trec_eval: score
  descending, ties by doc id descending, scores compared in float32 (--precision float64 for
  trec_eval 10); the file's rank column is ignored.

fill (labels on top of people's; docs/filling-holes.md):
  --fill LLM_QRELS scores each run three ways (see --fill) and gives the share of its top k
  judged by people, filled by the LLM, unjudged; JSON records add "regime". With pairs graded
  by both (grade --also-judged), the filled score gets a corrected value and a 95% interval.

baseline (docs/significance.md):
  --baseline NAME compares each other run with NAME over the queries both are scored on: diff
  is the mean of the per-query differences (95% interval: diff_ci_low, diff_ci_high), p_value
  that of --test, p_adjusted after --correction. JSON and CSV add them to the "all" records;
  the table marks with * the means that differ at p_adjusted < 0.05.

default measures: {defaults} (thresholds from QRELS, as above)
"""


def register(sub: Any) -> None:
    parser = add_command(sub, "evaluate", __doc__, epilog=epilog())
    # QRELS and RUN are checked in `run`, not by argparse: `-m nDCG@10 QRELS RUN` (trec_eval's
    # order) makes -m take the files as measures, and only `run` can say so.
    parser.usage = "relgrade evaluate [options] QRELS RUN [RUN ...]"
    _add_inputs(parser)
    add_measures(parser, "measures to compute (see below; default: the list at the end)")
    _add_options(parser)
    output.add_flags(parser)
    # RUN ... may take no word (with --dataset): runs after an option come back as these
    parser.set_defaults(func=run, extra_positionals=[])


def _add_inputs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "qrels",
        metavar="QRELS",
        nargs="?",
        help="TREC qrels (qid iter docid grade, any integer grade), a grades CSV "
        "(query_id,doc_id,grade), or a judgments JSONL from `relgrade grade` (ok judgments; "
        "failed ones stay unjudged); .gz ok",
    )
    parser.add_argument(
        "runs",
        metavar="RUN",
        nargs="*",
        help="TREC run(s) (qid Q0 docid rank score tag; later columns ignored); - reads stdin",
    )
    parser.add_argument(
        "--dataset",
        metavar="ID",
        help="take the qrels from this ir_datasets id: then every positional is a RUN "
        "(needs relgrade[ir-datasets])",
    )


def _add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--per-query", action="store_true", help="also print each query's values")
    parser.add_argument("--format", choices=("table", "csv", "json"), default="table")
    parser.add_argument(
        "--trec-eval-missing",
        dest="skip_missing",
        action="store_true",
        help="leave queries a run does not answer out of its mean (trec_eval's default) "
        "instead of scoring them 0",
    )
    # The old spelling: `--skip-missing` means "skip unknown ids" in `grade`, so here it is
    # only a deprecated alias of --trec-eval-missing, said on stderr and hidden from --help.
    parser.add_argument(
        "--skip-missing", dest="old_skip_missing", action="store_true", help=argparse.SUPPRESS
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
        help="move judgments or grades-CSV grades outside 0..3 to the nearest of 0 and 3 "
        "instead of failing (TREC qrels keep any integer grade, as trec_eval)",
    )
    parser.add_argument(
        "--trec-eval-level",
        type=int,
        default=1,
        metavar="N",
        help="relevance level of trec_eval's names (P_10, map, recip_rank ...): trec_eval's -l "
        "(default 1, as trec_eval)",
    )


def _qrels(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """QRELS as read_grades reads it, or --dataset's qrels."""
    if not args.dataset:
        return read_grades(args.qrels, clamp=args.clamp)
    from grader.evaluation.files import read_qrels_input
    from grader.io.datasets import iterate, load_dataset, require

    dataset = load_dataset(args.dataset)
    require(dataset, args.dataset, "qrels")
    return read_qrels_input(iterate(dataset, "qrels"), clamp=args.clamp)


def _check_files_given(args: argparse.Namespace) -> None:
    """QRELS and a RUN must be given; when -m took them as measures, say so."""
    if args.qrels is not None and args.runs:
        return
    missing = "QRELS and RUN" if args.qrels is None else "RUN"
    files = [m for m in args.measures if Path(m).exists() or m == "-"]
    if files:
        raise InputError(
            f"no {missing}: -m took {', '.join(files)} as measures (-m takes every word up to "
            "the next option)",
            hint="give the files first (`relgrade evaluate QRELS RUN -m nDCG@10`), or end the "
            "measures with -- (`-m nDCG@10 -- QRELS RUN`)",
        )
    raise InputError(
        f"the following arguments are required: {missing}",
        hint="relgrade evaluate QRELS RUN [RUN ...] [-m MEASURE ...]",
    )


def _check_inputs(args: argparse.Namespace) -> None:
    """The positionals and flags checked together, before any file is read."""
    if args.old_skip_missing:
        print(
            "note: evaluate --skip-missing is deprecated, use --trec-eval-missing (leave queries"
            " a run does not answer out of its mean); --skip-missing belongs to grade (skip"
            " unknown ids)",
            file=sys.stderr,
        )
        args.skip_missing = True
    args.runs = [*args.runs, *args.extra_positionals]
    if args.dataset:
        args.runs = [args.qrels, *args.runs] if args.qrels is not None else args.runs
        if not args.runs:
            raise InputError("--dataset ID needs at least one RUN", hint="--dataset ID RUN ...")
    else:
        _check_files_given(args)
    check_measures(args.measures)  # a bad name fails before any file is read
    from grader.job.options import one_stdin

    one_stdin(
        [
            ("QRELS", args.qrels),
            ("RUN", args.runs),
            ("--fill", args.fill),
            ("--fill-manifest", args.fill_manifest),
        ]
    )


def run(args: argparse.Namespace) -> int:
    _check_inputs(args)
    options = output.options(args)
    if args.fill:
        if args.dataset:
            raise InputError("--fill reads people's qrels from QRELS, not from --dataset")
        return output.run_fill(args, options)
    if args.llm_scale or args.fill_manifest:
        raise InputError("--llm-scale and --fill-manifest go with --fill LLM_QRELS")
    judged, facts = _qrels(args)
    missing: Missing = "skip" if args.skip_missing else "zero"
    runs: list[tuple[str, RunJoin]] = [
        (name, path_join(path, judged, args.precision))
        for name, path in zip(run_names(args.runs), args.runs, strict=True)
    ]
    evaluation = evaluate_judged(
        facts,
        runs,
        args.measures,
        missing=missing,
        clamp=args.clamp,
        trec_eval_level=args.trec_eval_level,
    )
    records = evaluation.records(args.per_query)
    comparisons = None
    if options:
        comparisons = compare(evaluation.results, options)
        comparisons.annotate(records)
    notes = evaluation.notes  # below the tables; on stderr beside JSON or CSV
    if args.format == "table":
        _print_tables(evaluation.results, evaluation.measures, notes, args.per_query, comparisons)
        notes = []
    else:
        output.print_records(records, args.format, output.csv_fields(records))
    for note in notes + evaluation.warnings:
        print(note, file=sys.stderr)
    return 0


def _print_tables(
    results: list[tuple[str, Scores]],
    names: list[str],
    notes: list[str],
    per_query: bool,
    comparisons: Comparisons | None = None,
) -> None:
    from rich.console import Console

    console = Console(highlight=False)
    counts = {m for m in names if is_count(m)}

    def cell(value: float, measure: str) -> str:
        return output.fmt(value, ".0f" if measure in counts else ".4f")

    if per_query:
        for name, scores in results:
            table = output.table(f"{name}: per query", ("query", *names), ("query",))
            rows = scores.values[[scores.measures.index(m) for m in names]].T.tolist()
            for qid, row in zip(scores.query_ids, rows, strict=True):
                table.add_row(qid, *(cell(v, m) for m, v in zip(names, row, strict=True)))
            console.print(table)
    titles = [
        f"{n} (baseline)" if comparisons and n == comparisons.baseline else n for n, _ in results
    ]
    table = output.table("mean over queries", ("measure", *titles), ("measure",))
    means = [(name, dict(scores.means())) for name, scores in results]
    for m in names:
        table.add_row(m, *(cell(float(c[m]), m) + output.mark(comparisons, r, m) for r, c in means))
    console.print(table)
    if comparisons:
        output.print_comparisons(console, comparisons)
    if counts:
        listed = ", ".join(m for m in names if m in counts)
        console.print(f"{listed}: summed over queries, not averaged (as trec_eval)", soft_wrap=True)
    for note in notes:
        console.print(note, soft_wrap=True)
