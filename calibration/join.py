"""Join LLM and human grades on (query_id, doc_id): the pairs both sides graded, and the rest."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pandas as pd

from grader.errors import InputError
from grader.io.grade_format import DISTRIBUTION_COLUMNS

LLM_EXTRAS: tuple[str, ...] = ("confidence", "expected_grade", *DISTRIBUTION_COLUMNS)
"""Columns of the LLM side carried into the paired frame when the judge gave them."""


@dataclass(frozen=True)
class PairedGrades:
    """Grades of the pairs graded on both sides (`frame`: query_id, doc_id, human, llm and the
    LLM's confidence and distribution when known), every LLM-graded pair (`llm`), and counts."""

    frame: pd.DataFrame
    llm: pd.DataFrame
    human: pd.DataFrame
    llm_only: int
    human_only: int

    @property
    def n(self) -> int:
        return len(self.frame)

    def query_index(self) -> tuple[list[str], npt.NDArray[np.int64]]:
        """The distinct query ids (sorted) and each paired row's index into them."""
        codes, uniques = pd.factorize(self.frame["query_id"], sort=True)
        return [str(q) for q in uniques], np.asarray(codes, dtype=np.int64)


def pair_keys(frame: pd.DataFrame) -> list[tuple[str, str]]:
    """The (query_id, doc_id) of each row, as strings."""
    return list(zip(frame["query_id"].astype(str), frame["doc_id"].astype(str), strict=True))


def _keyed(frame: pd.DataFrame, side: str) -> pd.DataFrame:
    missing = {"query_id", "doc_id", "grade"} - set(frame.columns)
    if missing:
        raise InputError(f"{side} grades lack columns {sorted(missing)}")
    out = frame[["query_id", "doc_id", "grade"]].copy()
    out["query_id"] = out["query_id"].astype(str)
    out["doc_id"] = out["doc_id"].astype(str)
    out["grade"] = out["grade"].astype(np.int64)
    return out


def pair_grades(llm: pd.DataFrame, human: pd.DataFrame) -> PairedGrades:
    """Inner-join the two sides; raises InputError when no pair is graded on both."""
    left = _keyed(llm, "LLM")
    right = _keyed(human, "human")
    extras = [c for c in LLM_EXTRAS if c in llm.columns]
    left_full = left.join(llm[extras].astype(np.float64)) if extras else left
    both = right.merge(
        left_full,
        on=["query_id", "doc_id"],
        how="inner",
        suffixes=("_human", "_llm"),
        validate="1:1",
    )
    both = both.rename(columns={"grade_human": "human", "grade_llm": "llm"})
    both = both.sort_values(["query_id", "doc_id"], kind="stable").reset_index(drop=True)
    if both.empty:
        raise InputError(
            "no (query_id, doc_id) pair is graded on both sides",
            hint="check that the LLM and human files cover the same queries and doc ids",
        )
    dist = [c for c in DISTRIBUTION_COLUMNS if c in llm.columns]
    return PairedGrades(
        frame=both[["query_id", "doc_id", "human", "llm", *extras]],
        llm=left.join(llm[dist].astype(np.float64)) if dist else left,
        human=right,
        llm_only=len(left) - len(both),
        human_only=len(right) - len(both),
    )


def distribution_mean(
    grades: pd.Series, distribution: pd.DataFrame | None, values: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Per pair, the mean of `values[g]` over the judge's grade distribution where it gave one
    (all four p_grade_0..3 columns, none NaN: relgrade writes them together), else `values` at
    the pair's grade."""
    at_grade = grades.to_numpy(dtype=np.int64)
    out: npt.NDArray[np.float64] = np.asarray(values, dtype=np.float64)[at_grade]
    cols = list(DISTRIBUTION_COLUMNS)
    if distribution is not None and all(c in distribution.columns for c in cols):
        p = distribution[cols].to_numpy(dtype=np.float64)
        known = ~np.isnan(p).any(axis=1)
        out[known] = p[known] @ values
    return out


def relevance_prediction(
    grades: pd.Series, distribution: pd.DataFrame | None, threshold: int
) -> npt.NDArray[np.float64]:
    """The LLM's P(grade >= threshold) per pair (`distribution_mean`): 1.0 or 0.0 from the grade
    where the judge gave no distribution."""
    relevant = (np.arange(4) >= threshold).astype(np.float64)
    out = distribution_mean(grades, distribution, relevant)
    np.clip(out, 0.0, 1.0, out=out)
    return out
