"""Qrels, runs and grades as a notebook holds them (DataFrames of either convention, pytrec_eval
dicts, ir_datasets / ir_measures tuples) made into the frames the file readers give."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd

from grader.errors import InputError
from grader.io.datasets import iterate
from grader.io.grade_format import DISTRIBUTION_COLUMNS as DISTRIBUTION
from grader.io.grade_format import LARGE_HINT, LARGEST_GRADE, clamp_hint
from grader.metrics.rank_order import Precision

#: Each column relgrade reads, and the names either convention gives it (first found wins).
QUERY_ID = ("query_id", "qid")
DOC_ID = ("doc_id", "docno", "docid")
GRADE = ("grade", "relevance", "label")
SCORE = ("score",)

QRELS_EXPECTED = "query_id, doc_id, grade (or relevance), or PyTerrier's qid, docno, label"
RUN_EXPECTED = "query_id, doc_id, score, or PyTerrier's qid, docno, score"


def is_path(value: object) -> bool:
    """A file path given as text or a Path."""
    return isinstance(value, str | Path)


IDS_AS_TEXT = (
    "read ids as text, e.g. pd.read_csv(path, dtype={'query_id': str, 'doc_id': str}) or "
    "pd.read_json(path, lines=True, dtype={'query_id': str, 'doc_id': str})"
)


def check_ids(column: pd.Series, what: str) -> None:
    """InputError for an id that is empty, neither text nor an integer (a tuple, a bool), or a
    decimal number pandas read ("1" as 1.0, "007" as 7.0): as text it would be no id or another."""
    empty = column.isna().to_numpy().copy()
    kind = pd.api.types.infer_dtype(column, skipna=True)
    if kind == "string":
        empty |= column.eq("").to_numpy()
    for row, value in enumerate(column if kind not in _ID_KINDS else ()):
        if isinstance(value, bool | np.bool_) or not isinstance(
            value, str | int | np.integer | float | np.floating
        ):
            raise InputError(
                f"the {what}'s {column.name} column holds a {type(value).__name__} "
                f"({value!r}, row {row}): an id is text or an integer",
                hint="give each id as text",
            )
        empty[row] |= isinstance(value, str) and not value.strip()
    if empty.any():
        raise InputError(
            f"the {what}'s {column.name} column has an empty id (row {int(empty.argmax())})",
            hint="give every row an id",
        )
    if kind in ("integer", "empty", "string"):
        return
    decimal = next((v for v in column if isinstance(v, float | np.floating)), None)
    if decimal is not None:
        raise InputError(
            f"the {what}'s {column.name} column holds ids read as decimal numbers "
            f'({decimal!r}): as text they are not the ids of the files ("1" read '
            'as 1.0, "007" as 7.0)',
            hint=IDS_AS_TEXT,
        )


_ID_KINDS = ("integer", "floating", "empty", "string")  # no value to look at one by one


def check_texts(frame: pd.DataFrame, columns: list[str], what: str) -> None:
    """InputError for a missing text (NaN, None) in any of `columns`, naming row and column."""
    for name in columns:
        empty = frame[name].isna().to_numpy()
        if empty.any():
            raise InputError(
                f"the {what}'s {name} column has no text (row {int(empty.argmax())})",
                hint="give every row its text (an empty string if it has none)",
            )


def one_text_per_id(ids: pd.Series, texts: pd.Series, what: str) -> None:
    """InputError when one id is given two different texts (a file may not give an id twice),
    naming the id, both rows and the text column."""
    pairs = pd.DataFrame({"id": ids.to_numpy(), "text": texts.astype(str).to_numpy()})
    distinct = pairs.drop_duplicates()
    clash = distinct["id"].duplicated()
    if not clash.any():
        return
    twice = distinct.loc[clash, "id"].iloc[0]
    rows = [int(r) for r in pairs.index[pairs["id"] == twice]]
    text = pairs["text"].tolist()
    first = rows[0]
    other = next(r for r in rows if text[r] != text[first])
    raise InputError(
        f"the {what} gives {ids.name} {twice!r} two different {texts.name} values (rows "
        f"{first} and {other})",
        hint=f"one {texts.name} per {ids.name}, as in a file",
    )


def id_text(column: pd.Series, what: str) -> pd.Series:
    """An id column as text, as a file gives it (`check_ids` first)."""
    check_ids(column, what)
    return column.astype(str)


def frame_texts(
    frame: pd.DataFrame, wanted: dict[str, tuple[str, ...]], what: str, expected: str
) -> tuple[pd.Series, pd.Series, pd.DataFrame]:
    """(ids, texts, frame) of a queries or docs DataFrame, checked as a file's lines are."""
    key, text = find_columns(frame, wanted, what, expected).values()
    frame = frame.reset_index(drop=True)  # rows are named by their place
    ids = id_text(frame[key], what)
    check_texts(frame, [text], what)
    one_text_per_id(ids, frame[text], what)
    return ids, frame[text].astype(str), frame


def _records_frame(items: Iterable[Any], what: str, expected: str) -> pd.DataFrame:
    """An iterable of namedtuples (ir_datasets, ir_measures) as a frame of their fields."""
    rows = list(items)
    if rows and not hasattr(rows[0], "_fields"):
        raise InputError(
            f"the {what} is an iterable of {type(rows[0]).__name__}, not of namedtuples",
            hint=f"give a path, a DataFrame, a dict, or namedtuples with fields {expected}",
        )
    return pd.DataFrame(rows)  # columns named by the namedtuples' fields


def _nested(values: Mapping[Any, Any], column: str) -> pd.DataFrame:
    """A pytrec_eval dict {qid: {docid: value}} as a long frame."""
    rows: list[tuple[str, str, Any]] = []
    for qid, inner in values.items():
        if not isinstance(inner, Mapping):
            raise InputError(
                f"the dict maps query {qid!r} to a {type(inner).__name__}, not to a dict",
                hint="give {query_id: {doc_id: value}} as pytrec_eval takes it",
            )
        rows += [(str(qid), str(d), cell) for d, cell in inner.items()]
    return pd.DataFrame(rows, columns=["query_id", "doc_id", column])


def as_frame(value: Any, column: str, what: str) -> pd.DataFrame:
    """A DataFrame, a pytrec_eval dict or an iterable of namedtuples as a frame of query_id,
    doc_id and `column` ("grade" or "score"), found under either convention's names."""
    expected = QRELS_EXPECTED if column == "grade" else RUN_EXPECTED
    if hasattr(value, "qrels_iter") and column == "grade":
        value = iterate(value, "qrels")  # an ir_datasets dataset given as qrels
    if isinstance(value, Mapping):
        value = _nested(value, column)
    elif isinstance(value, Iterable) and not isinstance(value, str | bytes | pd.DataFrame):
        value = _records_frame(value, what, expected)
    elif not isinstance(value, pd.DataFrame):
        raise InputError(
            f"the {what} is a {type(value).__name__}",
            hint="give a path, a DataFrame, a dict {query_id: {doc_id: value}} or namedtuples",
        )
    wanted = {"query_id": QUERY_ID, "doc_id": DOC_ID, column: GRADE if column == "grade" else SCORE}
    found = find_columns(value, wanted, what, expected)
    renamed: pd.DataFrame = value.rename(columns={v: k for k, v in found.items() if v != k})
    return renamed


def find_columns(
    frame: pd.DataFrame, wanted: Mapping[str, tuple[str, ...]], what: str, expected: str
) -> dict[str, str]:
    """The column each of `wanted` is read from (its first name the frame has), else InputError."""
    found = {t: next((n for n in names if n in frame.columns), "") for t, names in wanted.items()}
    if lacking := [t for t, n in found.items() if not n]:
        raise InputError(
            f"the {what} has columns {', '.join(map(str, frame.columns)) or '(none)'}: it lacks "
            f"{', '.join(lacking)}; expected {expected}",
            hint="rename the columns, e.g. frame.rename(columns={...})",
        )
    return found


def grades_table(value: Any, what: str = "qrels") -> pd.DataFrame:
    """Qrels or grades as [query_id, doc_id, grade, ...]; rows without a grade are left out, counted
    in `attrs["failed"]` (status "failed") or `attrs["ungraded"]`."""
    frame = as_frame(value, "grade", what)
    grades = pd.to_numeric(frame["grade"], errors="coerce")
    absent = grades.isna().to_numpy()
    status = frame["status"].astype(str).to_numpy() if "status" in frame.columns else ""
    failed = absent & (status == "failed")
    bad = absent & ~frame["grade"].isna().to_numpy()
    if bad.any():
        raise InputError(
            f"the {what} holds a grade that is not a number: "
            f"{frame['grade'].iloc[int(np.argmax(bad))]!r}",
            hint="grades are integers (0..3 for LLM and human grades)",
        )
    kept = frame.loc[~absent].copy()
    values = grades[~absent].to_numpy(dtype=np.float64)
    if np.any(values != np.round(values)):
        raise InputError(f"the {what} holds a grade that is not an integer", hint="round it")
    _refuse(kept, np.abs(values) > LARGEST_GRADE, what, "is too large", LARGE_HINT)
    kept["query_id"] = id_text(kept["query_id"], what)
    kept["doc_id"] = id_text(kept["doc_id"], what)
    kept["grade"] = values.astype(np.int64)
    others = [c for c in kept.columns if c not in ("query_id", "doc_id", "grade")]
    kept = kept[["query_id", "doc_id", "grade", *others]].reset_index(drop=True)
    kept.attrs.update(
        source="frame",
        failed=int(failed.sum()),
        ungraded=int((absent & ~failed).sum()),
        clamped=0,
    )
    return kept


def _refuse(
    frame: pd.DataFrame, bad: npt.NDArray[np.bool_], what: str, why: str, hint: str
) -> None:
    """InputError naming the grade and ids of the first `bad` row, and `why` it is refused."""
    if bad.any():
        row = int(np.argmax(bad))
        raise InputError(
            f"the {what} grade {frame['grade'].iloc[row]} of ({frame['query_id'].iloc[row]}, "
            f"{frame['doc_id'].iloc[row]}) {why}",
            hint=hint,
        )


def run_table(value: Any, *, precision: Precision = "float32", what: str = "run") -> pd.DataFrame:
    """A run (not a path) as `read_run` gives a file's, ranked by the same code."""
    import pyarrow as pa

    from grader.io.trec import check_duplicates, query_codes, ranked_frame
    from grader.metrics.join_arrow import arrow_strings

    frame = as_frame(value, "score", what)
    scores = np.asarray(pd.to_numeric(frame["score"], errors="coerce"), dtype=np.float64)
    if not np.all(np.isfinite(scores)):
        raise InputError(
            f"the {what} holds a score that is not a finite number",
            hint="give every row a numeric score",
        )
    check_ids(frame["query_id"], what)
    check_ids(frame["doc_id"], what)
    table = pa.table(
        {"query_id": arrow_strings(frame["query_id"]), "doc_id": arrow_strings(frame["doc_id"])}
    )
    codes = query_codes(table["query_id"])

    def twice(qid: str, did: str, rows: list[int]) -> InputError:
        return InputError(
            f"the {what} ranks doc {did!r} twice for query {qid!r} (rows {rows[0]} and {rows[1]})",
            hint="keep one row per (query, doc), e.g. drop_duplicates",
        )

    check_duplicates(table, codes, twice)
    return ranked_frame(table, codes, scores, precision)


def run_inputs(runs: Any) -> list[tuple[str | None, Any]]:
    """Several runs as (name, run): a mapping name -> run, a list of paths, or one run (name
    None: the caller names it). A pytrec_eval run dict is one run, not a mapping of runs."""
    if isinstance(runs, Mapping) and runs and not _is_nested_scores(runs):
        return [(str(name), run) for name, run in runs.items()]
    if isinstance(runs, list | tuple) and runs and all(is_path(r) for r in runs):
        return [(None, r) for r in runs]
    return [(None, runs)]


def _is_nested_scores(value: Mapping[Any, Any]) -> bool:
    """{qid: {docid: number}}: a pytrec_eval run or qrels (not {name: run})."""
    inner = next(iter(value.values()))
    if not isinstance(inner, Mapping):
        return False
    first = next(iter(inner.values()), 0)
    return isinstance(first, int | float | np.number)


def on_scale(frame: pd.DataFrame, what: str, *, clamp: bool = False) -> pd.DataFrame:
    """Grades held to 0..3 as the file readers hold them: outside, an InputError unless `clamp`."""
    from grader.models import MAX_GRADE, MIN_GRADE

    grades = frame["grade"].to_numpy()
    outside = (grades < MIN_GRADE) | (grades > MAX_GRADE)
    if not clamp:
        _refuse(frame, outside, what, f"is outside {MIN_GRADE}..{MAX_GRADE}", clamp_hint())
    if outside.any():
        frame = frame.assign(grade=np.clip(grades, MIN_GRADE, MAX_GRADE))
        frame.attrs["clamped"] = int(outside.sum())
    return frame


def llm_grades_table(value: Any, *, clamp: bool = False) -> pd.DataFrame:
    """LLM grades with the columns `read_llm_grades` gives a judgments file (from a `distribution`
    column: the chosen grade's probability is the confidence)."""
    frame = on_scale(grades_table(value, "llm grades"), "llm grades", clamp=clamp)
    out = frame[["query_id", "doc_id", "grade"]].copy()
    if "judge" in frame.columns:
        out["judge"] = frame["judge"].astype(str)
    if "distribution" in frame.columns:  # P(grade = 0..3), of which the grade's is the confidence
        given = [
            d if isinstance(d, list | tuple) and len(d) == 4 else [np.nan] * 4
            for d in frame["distribution"]
        ]
        if "confidence" not in frame.columns:
            frame = frame.assign(
                confidence=[float(d[g]) for d, g in zip(given, frame["grade"], strict=True)]
            )
        if not any(c in frame.columns for c in DISTRIBUTION):
            frame = frame.assign(
                **{c: [float(d[g]) for d in given] for g, c in enumerate(DISTRIBUTION)}
            )
    for optional in ("expected_grade", "confidence", *DISTRIBUTION):
        if optional in frame.columns and not frame[optional].isna().all():
            out[optional] = frame[optional].astype("float64")
    out.attrs.update(frame.attrs)
    return out


def run_frames(
    runs: Any, *, precision: Precision = "float32", stdin: bool = True
) -> dict[str, pd.DataFrame]:
    """Each run by its name, as `evaluate` names them (a path's by `run_names`, an unnamed
    table "run"); `stdin=False` refuses `-` (a run the caller must read twice)."""
    if runs is None or (isinstance(runs, list) and not runs):
        return {}
    from grader.io.runs import run_names
    from grader.io.trec import read_run

    items = run_inputs(runs)
    paths = iter(run_names([str(r) for _, r in items if is_path(r)]))
    frames: dict[str, pd.DataFrame] = {}
    for name, run in items:
        if is_path(run) and str(run) == "-" and not stdin:
            raise InputError(
                "fill= reads each run from a file, not stdin (-)", hint="save it first"
            )
        if is_path(run):
            frames[name or next(paths)] = read_run(str(run), precision=precision)
        else:
            frames[name or "run"] = run_table(run, precision=precision)
    return frames
