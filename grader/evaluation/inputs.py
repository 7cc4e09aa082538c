"""`relgrade evaluate`'s inputs as the Python API takes them: paths (read exactly as the
command reads them), DataFrames, pytrec_eval dicts and namedtuple iterables
(`grader.io.python_inputs`), several runs as a mapping name -> run."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grader.errors import InputError
from grader.evaluation.files import indexed, path_join, read_grades, table_join
from grader.evaluation.scoring import RunJoin
from grader.io.python_inputs import grades_table, is_path, run_inputs, run_table
from grader.io.runs import run_names
from grader.metrics.join_dicts import DictJudgments
from grader.metrics.rank_order import Precision

if TYPE_CHECKING:
    from grader.metrics.join_arrow import Judgments

UNNAMED_RUN = "run"


def read_qrels_input(qrels: Any, *, clamp: bool = False) -> tuple[Any, dict[str, Any]]:
    """(judgments indexed for the join, facts as `read_grades` gives them) of any qrels input."""
    if is_path(qrels):
        return read_grades(str(qrels), clamp=clamp)
    frame = grades_table(qrels)
    if not len(frame):
        raise InputError(
            "no judgments in the qrels (it is empty, or no row has a grade)",
            hint="give rows query_id, doc_id, grade",
        )
    return indexed(frame)


def run_joins(
    runs: Any, judged: DictJudgments | Judgments, *, precision: Precision = "float32"
) -> list[tuple[str, RunJoin]]:
    """Each run of `runs` (one run, a list of paths, or a mapping name -> run) with its name
    (a path's is `run_names`', an unnamed table's is "run") and its join with `judged`."""
    items = run_inputs(runs)
    paths = [str(r) for _, r in items if is_path(r)]
    path_names = iter(run_names(paths))
    joins: list[tuple[str, RunJoin]] = []
    for given, run in items:
        if is_path(run):
            name = given or next(path_names)
            joins.append((name, path_join(str(run), judged, precision)))
        else:
            frame = run_table(run, precision=precision)
            joins.append((given or UNNAMED_RUN, table_join(frame, judged, precision)))
    return joins
