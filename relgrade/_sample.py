"""`relgrade.sample` and its result `Sample`: `relgrade sample` for notebooks."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from calibration.spotcheck.draw import DrawnSample, draw_blind_sample, read_population
from calibration.spotcheck.sequential import UNIFORM_SHARE
from grader.errors import InputError, RelgradeWarning
from grader.io.docs import all_docs, queries_of
from grader.io.python_inputs import grades_table, id_text, is_path
from grader.models import Doc, Judgment, JudgmentError, Query
from grader.prompts.files import prompt_budgets


class Sample:
    """A drawn spot-check sample: `pairs` in the order people will see them (ids, texts,
    stratum, inclusion probability), `to_csv(path)` the blind CSV and its manifest beside it
    (as `relgrade sample --out` writes them), `manifest` the design."""

    def __init__(self, drawn: DrawnSample) -> None:
        self.drawn = drawn
        self.manifest = drawn.manifest

    @property
    def pairs(self) -> pd.DataFrame:
        """One row per sampled pair, in the order of the blind CSV."""
        ids = ["query_id", "doc_id"]
        items = pd.DataFrame(self.drawn.items, columns=[*ids, "query", "document"])
        design = [*ids, "stratum", "inclusion_probability", "uncertainty"]
        drawn = pd.DataFrame(self.drawn.draw.pairs, columns=design)
        return items.merge(drawn, on=ids, how="left")

    def to_csv(self, path: str | Path) -> Path:
        """Write the blind CSV at `path` and its manifest beside it; returns the manifest's
        path (`calibrate` finds it beside the human grades that `sample --import` writes)."""
        return self.drawn.write(path)

    def summary(self) -> str:
        """What was drawn, as `relgrade sample` prints it."""
        return "\n".join(self.drawn.summary_lines())

    def __repr__(self) -> str:
        return f"Sample({self.summary()})"

    def _repr_html_(self) -> str:
        return f"<pre>{self.summary()}</pre>" + str(self.pairs.to_html(max_rows=20))


def _judgment(row: Mapping[Any, Any]) -> Judgment:
    """A row of `relgrade.grade`'s frame (or of any grades frame) as a Judgment."""
    status = row.get("status") or "ok"
    grade = row.get("grade")
    ok = status == "ok" and grade is not None and not pd.isna(grade)
    distribution = row.get("distribution")
    return Judgment(
        query_id=str(row["query_id"]),
        doc_id=str(row["doc_id"]),
        grade=int(grade) if ok and grade is not None else None,
        status="ok" if ok else "failed",
        judge=str(row.get("judge") or "frame"),
        key=str(row.get("key") or f"{row['query_id']} {row['doc_id']}"),
        distribution=list(distribution) if isinstance(distribution, list | tuple) else None,
        expected_grade=_number(row.get("expected_grade")),
        judges=row.get("judges") if isinstance(row.get("judges"), dict) else None,
        disagreement=_number(row.get("disagreement")),
        error=None if ok else JudgmentError(type="failed", message=str(row.get("error"))),
    )


def _number(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def _population(judgments: Any, strategy: str) -> list[Judgment]:
    if is_path(judgments):
        return read_population(str(judgments), strategy)
    if isinstance(judgments, pd.DataFrame) and "status" in judgments.columns:
        frame = judgments.rename(columns={"qid": "query_id", "docno": "doc_id"})
        ids = {c: id_text(frame[c], "judgments") for c in ("query_id", "doc_id")}
        return [_judgment(r) for r in frame.assign(**ids).to_dict("records")]
    frame = grades_table(judgments, "judgments")
    return [_judgment(r) for r in frame.to_dict("records")]


_NOT_DESIGN = ("judgments", "queries", "docs", "exclude", "prompt")


def sample(
    judgments: Any,
    n: int | None = None,
    fraction: float | None = None,
    strategy: str = "stratified",
    seed: int = 0,
    *,
    queries: Any = None,
    docs: Any = None,
    exclude: Any = None,
    allocation: str = "equal",
    low_share: float = 0.8,
    floor: float = 0.05,
    uniform_share: float = UNIFORM_SHARE,
    threshold: int = 2,
    prompt: str | None = None,
) -> Sample:
    """Draw a blind spot-check sample of LLM judgments, as `relgrade sample` does.

    `judgments`: a judgments JSONL or qrels path, the frame `relgrade.grade` returns, or any
    grades form `evaluate` takes; failed judgments and pairs in `exclude` (human grades) are
    left out. `queries` and `docs` (any form `grade` takes) give people the texts; without
    them the sample holds ids only; each document is cut to the budget of the prompt its pair
    was graded with (`prompt`: one for every pair), as the LLM saw it. `uniform_share` and
    `threshold` shape the `active` strategy. Nothing is written until `to_csv`.

    >>> import relgrade as rg
    >>> llm = {"q1": {"d1": 3, "d2": 0, "d3": 2, "d4": 1}}
    >>> texts = {"q1": "retry backoff"}, {f"d{i}": f"doc {i}" for i in range(1, 5)}
    >>> drawn = rg.sample(llm, n=2, strategy="uniform", seed=1, queries=texts[0], docs=texts[1])
    >>> drawn.pairs["inclusion_probability"].tolist()
    [0.5, 0.5]
    """
    design = {k: v for k, v in locals().items() if k not in _NOT_DESIGN}  # the draw's keywords
    if n is None and fraction is None:
        raise InputError("give n or fraction")
    population = _population(judgments, strategy)
    excluded: set[tuple[str, str]] = set()
    for grades in [] if exclude is None else exclude if isinstance(exclude, list) else [exclude]:
        frame = _human(grades)
        excluded.update(zip(frame["query_id"], frame["doc_id"], strict=True))
    drawn = draw_blind_sample(
        population,
        _texts_reader(queries, docs),
        source=str(judgments) if is_path(judgments) else None,
        excluded=excluded,
        budgets=lambda eligible, pairs: prompt_budgets(prompt, eligible, pairs),
        **design,
    )
    return Sample(drawn)


def _texts_reader(
    queries: Any, docs: Any
) -> Callable[[list[tuple[str, str]]], tuple[dict[str, Query], dict[str, Doc]]]:
    """The texts of the drawn pairs, read only once the pairs are known (ids only, warned,
    without queries and docs)."""

    def texts(pairs: list[tuple[str, str]]) -> tuple[dict[str, Query], dict[str, Doc]]:
        if queries is None and docs is None:
            warnings.warn(
                "no texts for the sample (ids only): pass queries= and docs= so that people "
                "see the query and document",
                RelgradeWarning,
                stacklevel=4,
            )
            return {}, {}
        if queries is None or docs is None:
            raise InputError("queries and docs go together", hint="pass both")
        return queries_of(queries), all_docs(docs, ids={d for _, d in pairs})

    return texts


def _human(grades: Any) -> pd.DataFrame:
    if is_path(grades):
        from grader.io.grades import read_human_grades

        return read_human_grades(grades, clamp=True)
    return grades_table(grades, "exclude")
