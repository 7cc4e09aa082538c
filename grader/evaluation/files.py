"""Which reader reads `relgrade evaluate`'s files: small TREC files (`trec_small.SMALL_BYTES`)
in plain Python without importing Arrow, which takes longer than scoring them; others with Arrow,
grades CSV and judgments with pandas (`grader.io` says which reads what)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from grader.errors import InputError
from grader.io.files import iter_lines
from grader.io.grade_format import looks_like_qrels, looks_like_run
from grader.io.trec_small import small_judged_run, small_qrels
from grader.metrics.join_dicts import DictJudgments

if TYPE_CHECKING:
    import pandas as pd

    from grader.metrics.join_arrow import Judgments
    from grader.metrics.judged_rows import JudgedRun
    from grader.metrics.rank_order import Precision


def read_grades(path: str, *, clamp: bool) -> tuple[DictJudgments | Judgments, dict[str, Any]]:
    """QRELS (TREC qrels, judgments JSONL or grades CSV, told by the first data line) indexed for
    the join, and the facts read: `source`, `top`, `clamped`, `ungraded`, `failed`."""
    for lineno, line in iter_lines(path):
        if line.strip() and not line.lstrip().startswith("#"):
            if looks_like_run(line):
                raise InputError(
                    "this looks like a run (`qid Q0 docid rank score tag`), not qrels",
                    path=path,
                    line=lineno,
                    hint="give the qrels first, then the runs: relgrade evaluate QRELS RUN",
                )
            if line.lstrip().startswith("{"):
                from grader.io.grades import read_llm_grades

                return indexed(read_llm_grades(path, clamp=clamp))
            if not looks_like_qrels(line):
                from grader.io.grades import read_human_grades

                return indexed(read_human_grades(path, clamp=clamp))
            break
    small = small_qrels(path)
    if small is not None:
        if not len(small):
            raise _no_judgments(path)
        return small, {"source": "trec", "top": small.top(), "clamped": 0}
    arrow_without_pandas()
    from grader.io.trec import read_qrels_columns
    from grader.metrics.join_arrow import judgments

    qrels, _ = read_qrels_columns(path, any_grade=True)  # any grade: never clamped
    if not len(qrels):
        raise _no_judgments(path)
    grades = qrels["grade"].to_numpy()
    facts = {"source": "trec", "top": int(grades.max()), "clamped": 0}
    return judgments(qrels["query_id"], qrels["doc_id"], grades), facts


def _no_judgments(path: str) -> InputError:
    return InputError(
        "no judgments in the qrels (the file is empty or holds only comments)",
        path=path,
        hint="give TREC qrels lines `qid 0 docid grade`, a grades CSV or a judgments JSONL",
    )


def indexed(frame: Any) -> tuple[Judgments, dict[str, Any]]:
    """A grades frame (judgments JSONL, grades CSV) indexed, with its attrs as facts."""
    from grader.metrics.join_arrow import judgments_of

    facts = dict(frame.attrs)
    facts["top"] = int(frame["grade"].max()) if len(frame) else None
    return judgments_of(frame), facts


def path_join(
    path: str, judged: DictJudgments | Judgments, precision: Precision
) -> Callable[..., JudgedRun]:
    """The `RunJoin` of the run file at `path` (see `grader.evaluation.scoring.RunJoin`)."""

    def join(depth: int | None, ties: str | None = None) -> JudgedRun:
        if ties is None:
            return judged_run_file(path, judged, precision=precision, depth=depth)
        if path == "-":
            raise InputError(
                "a measure with ties=asc (ir_measures' RR@k, Judged@k) needs a run file, not -",
                hint="write the run to a file",
            )
        from grader.io.trec import read_run

        return table_join(read_run(path, precision=precision), judged, precision)(depth, ties)

    return join


def table_join(
    frame: pd.DataFrame, judged: DictJudgments | Judgments, precision: Precision
) -> Callable[..., JudgedRun]:
    """The `RunJoin` of a run table [query_id, doc_id, score|rank]; `ties="asc"` ranks it as
    ir_measures' RR@k and Judged@k do: score descending in double precision, ties by doc id
    ascending (code points), where trec_eval breaks them descending."""
    from grader.metrics.join_arrow import join_run
    from grader.metrics.judged_rows import JudgedRun

    indexed = judged.arrow if isinstance(judged, DictJudgments) else judged

    def join(depth: int | None, ties: str | None = None) -> JudgedRun:
        ranked = frame
        if ties is not None:
            keyed = frame[["query_id", "doc_id", "score"]].astype(
                {"query_id": str, "doc_id": str, "score": np.float64}
            )
            ordered = keyed.sort_values(
                ["query_id", "score", "doc_id"], ascending=[True, False, True], kind="stable"
            )
            ranks = ordered.groupby("query_id", sort=False).cumcount() + 1
            ranked = frame.assign(rank=ranks.reindex(frame.index).to_numpy(dtype=np.int64))
        return JudgedRun(join_run(indexed, ranked, precision=precision, depth=depth), len(frame))

    return join


def judged_run_file(
    path: str,
    judged: DictJudgments | Judgments,
    *,
    precision: Precision,
    depth: int | None,
) -> JudgedRun:
    """The run at `path` (`-`: stdin) joined with `judged`: in plain Python when both are small,
    else block by block (`run_stream`); a run that fails but reads as qrels is said to be qrels."""
    try:
        if isinstance(judged, DictJudgments):
            small = small_judged_run(path, judged, precision=precision, depth=depth)
            if small is not None:
                return small
        arrow_without_pandas()  # before Arrow's first conversion, `judged.arrow` among them
        from grader.io.run_stream import judged_run

        by_arrow = judged.arrow if isinstance(judged, DictJudgments) else judged
        return judged_run(path, by_arrow, precision=precision, depth=depth)
    except InputError as exc:
        if exc.line is None or "columns in a run line" not in exc.reason:
            raise
        first = next(((n, t) for n, t in iter_lines(path) if t.strip()), None)
        if first is None or not looks_like_qrels(first[1]) or first[0] != exc.line:
            raise
        raise InputError(
            f"{exc.reason}: this looks like qrels (`qid 0 docid grade`), not a run",
            path=exc.path,
            line=exc.line,
            hint="give the qrels first, then the runs: relgrade evaluate QRELS RUN",
        ) from None


def arrow_without_pandas() -> None:
    """Have pyarrow settle, before its first conversion, that it runs without pandas, which it would
    import on its first look and `relgrade evaluate` of TREC files never needs."""
    if "pandas" in sys.modules:
        return
    import pyarrow as pa

    class _RefusePandas:  # a meta path finder (importlib.abc costs an import of its own)
        def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
            if name == "pandas":
                raise ImportError("pandas is not needed to read TREC files")
            return None

    refuse = _RefusePandas()
    sys.meta_path.insert(0, refuse)
    try:
        pa.array([0])  # pyarrow's first conversion: it looks for pandas here, once
    finally:
        sys.meta_path.remove(refuse)


UNNAMED_RUN = "run"


def read_qrels_input(qrels: Any, *, clamp: bool = False) -> tuple[Any, dict[str, Any]]:
    """(judgments indexed for the join, facts as `read_grades` gives them) of any qrels input:
    a path, a DataFrame, a pytrec_eval dict or namedtuples (`grader.io.python_inputs`)."""
    from grader.io.python_inputs import grades_table, is_path

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
) -> list[tuple[str, Callable[..., JudgedRun]]]:
    """Each run of `runs` (one run, a list of paths, or a mapping name -> run) with its name
    (a path's is `run_names`', an unnamed table's is "run") and its join with `judged`."""
    from grader.io.python_inputs import is_path, run_inputs, run_table
    from grader.io.runs import run_names

    items = run_inputs(runs)
    paths = [str(r) for _, r in items if is_path(r)]
    path_names = iter(run_names(paths))
    joins: list[tuple[str, Callable[..., JudgedRun]]] = []
    for given, run in items:
        if is_path(run):
            name = given or next(path_names)
            joins.append((name, path_join(str(run), judged, precision)))
        else:
            frame = run_table(run, precision=precision)
            joins.append((given or UNNAMED_RUN, table_join(frame, judged, precision)))
    return joins
