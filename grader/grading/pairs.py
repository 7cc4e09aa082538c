"""Which (query, document) pairs to grade: each run's top `depth` per query in trec_eval's order,
deduplicated, without pairs people judged (unknown ids: an InputError, or skipped); `docs` may be a
loader. And what a run tracks of each pair (`PairState`) and queues for it (`Unit`)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from grader.errors import InputError
from grader.io.grades import read_human_grades
from grader.io.trec import read_run
from grader.judges.base import Judge
from grader.metrics.rank_order import Precision
from grader.models import Doc, Judgment, Query
from grader.spelling import option

SHOW_IDS = 5  # how many missing ids an error names

DocLoader = Callable[[set[str]], Mapping[str, Doc]]
"""The documents of the given ids (those it has), e.g. `lambda ids: read_docs(path, ids=ids)`."""


class Pair(NamedTuple):
    """One (query, document) pair to grade (a NamedTuple: cheap to build by the million)."""

    query: Query
    doc: Doc


@dataclass
class PairSelection:
    """The pairs to grade, in order, and what was dropped on the way (for the summary)."""

    pairs: list[Pair] = field(default_factory=list)
    candidates: int = 0  # pairs within depth, summed over runs (before deduplication)
    duplicates: int = 0  # pairs named by more than one run, counted once
    judged: int = 0  # left out because people already graded them
    missing: int = 0  # left out because the query or doc id is unknown (--skip-missing)
    missing_query_ids: list[str] = field(default_factory=list)
    missing_doc_ids: list[str] = field(default_factory=list)
    candidate_ids: list[tuple[str, str]] = field(default_factory=list)  # distinct, in order
    judged_ids: list[tuple[str, str]] = field(default_factory=list)  # of those, judged by people


def make_pairs(queries: Iterable[Query], docs: Iterable[Doc]) -> list[Pair]:
    """`Pair(query, doc)` of each (query, doc), built in C."""
    return list(map(tuple.__new__, repeat(Pair), zip(queries, docs, strict=True)))


def _judged_pairs(skip_judged: Sequence[str | Path | pd.DataFrame]) -> set[tuple[str, str]]:
    """The (query, doc) pairs of human qrels or grades CSVs (any grade counts)."""
    judged: set[tuple[str, str]] = set()
    for qrels in skip_judged:
        frame = qrels if isinstance(qrels, pd.DataFrame) else read_human_grades(qrels, clamp=True)
        judged.update(zip(frame["query_id"], frame["doc_id"], strict=True))
    return judged


def _read(run: str | Path | pd.DataFrame, precision: Precision) -> tuple[pd.DataFrame, Path | str]:
    """A run as read_run gives it, and how errors name it (its path, or a frame's name)."""
    if isinstance(run, pd.DataFrame):
        return run, f"run {run.attrs.get('name', 'run')}"
    return read_run(Path(run), precision=precision), Path(run)


def _first(ids: list[str]) -> str:
    shown = ", ".join(ids[:SHOW_IDS])
    return shown + (", ..." if len(ids) > SHOW_IDS else "")


def pairs_to_grade(
    runs: Sequence[str | Path | pd.DataFrame],
    queries: Mapping[str, Query],
    docs: Mapping[str, Doc] | DocLoader,
    *,
    depth: int = 10,
    skip_judged: Sequence[str | Path | pd.DataFrame] = (),
    skip_missing: bool = False,
    precision: Precision = "float32",
    judged_pairs: Collection[tuple[str, str]] = (),
    regrade_judged: Callable[[list[tuple[str, str]]], Collection[tuple[str, str]]] | None = None,
) -> PairSelection:
    """The pairs to grade from `runs` (frames or files); InputError on unknown ids unless
    `skip_missing`. `regrade_judged` picks judged pairs graded all the same."""
    if depth < 1:
        raise InputError(f"{option('--depth', 'depth')} must be at least 1, not {depth}")
    if not runs:
        raise InputError("no run given", hint=option("pass at least one --run RUN", "give runs="))
    judged = _judged_pairs(skip_judged)
    selection = PairSelection()
    first_run = _candidates(runs, depth, precision, selection)
    wanted = list(first_run)
    judged.update(judged_pairs)
    if judged:
        selection.candidate_ids = wanted
        selection.judged_ids = [pair_id for pair_id in wanted if pair_id in judged]
        also = regrade_judged(selection.judged_ids) if regrade_judged is not None else ()
        kept = [pair_id for pair_id in wanted if pair_id not in judged or pair_id in also]
        selection.judged = len(wanted) - len(kept)
        wanted = kept
    if selection.candidates and callable(docs):
        docs = docs({did for _, did in wanted})
    found: Mapping[str, Doc] = docs if isinstance(docs, Mapping) else {}
    _pair_up(wanted, queries, found, selection, first_run, skip_missing=skip_missing)
    return selection


def _candidates(
    runs: Sequence[str | Path | pd.DataFrame],
    depth: int,
    precision: Precision,
    selection: PairSelection,
) -> dict[tuple[str, str], Path | str]:
    """Each id pair within `depth` once, with the first run that names it."""
    first_run: dict[tuple[str, str], Path | str] = {}
    for run in runs:
        frame, run_path = _read(run, precision)
        if frame.empty:
            raise InputError(
                "found no pairs to grade: the run holds no result (empty, or only comments)",
                path=run_path,
                hint="give runs with lines `qid Q0 docid rank score tag`",
            )
        top = frame[frame["rank"] <= depth]
        # Plain lists: iterating the frame's Arrow-backed columns is slow per value.
        ids = list(zip(top["query_id"].tolist(), top["doc_id"].tolist(), strict=True))
        selection.candidates += len(ids)
        before = len(first_run)
        if not first_run:
            first_run = dict.fromkeys(ids, run_path)
        else:
            for pair_id in ids:
                first_run.setdefault(pair_id, run_path)
        selection.duplicates += len(ids) - (len(first_run) - before)
    return first_run


def _pair_up(
    wanted: list[tuple[str, str]],
    queries: Mapping[str, Query],
    found: Mapping[str, Doc],
    selection: PairSelection,
    first_run: Mapping[tuple[str, str], Path | str],
    *,
    skip_missing: bool,
) -> None:
    """`selection.pairs` of the `wanted` ids; unknown ids an InputError or skipped."""
    missing_q = {qid: None for qid, _ in wanted if qid not in queries}
    missing_d = {did: None for _, did in wanted if did not in found}
    selection.missing_query_ids = list(missing_q)
    selection.missing_doc_ids = list(missing_d)
    kept = wanted
    if missing_q or missing_d:
        kept = [p for p in wanted if p[0] not in missing_q and p[1] not in missing_d]
    selection.missing = len(wanted) - len(kept)
    if selection.missing and not skip_missing:
        parts = [
            f"{len(ids)} unknown {what} id(s) ({_first(list(ids))})"
            for what, ids in (("query", missing_q), ("doc", missing_d))
            if ids
        ]
        raise InputError(
            f"{selection.missing} pair(s) to grade name ids absent from the queries or docs: "
            + " and ".join(parts),
            path=next(first_run[p] for p in wanted if p[0] in missing_q or p[1] in missing_d),
            hint=f"add them to {option('--queries / --docs', 'queries= / docs=')}, or pass "
            f"{option('--skip-missing', 'skip_missing=True')} to leave those pairs out",
        )
    selection.pairs = make_pairs(
        map(queries.__getitem__, map(itemgetter(0), kept)),
        map(found.__getitem__, map(itemgetter(1), kept)),
    )


@dataclass
class Unit:
    """One judge call of a pair: its judge and the content key it is asked under."""

    state: PairState
    slot: int  # member index, or -1 for the verifier
    judge: Judge
    key: str


@dataclass
class PairState:
    """A pair's answers so far, its keys, and its output once done."""

    index: int
    pair: Pair
    keys: list[str]
    members: list[Judgment | None]
    missing: int
    requested: bool = False
    primary: Judgment | None = None
    verify_key: str | None = None
    ensemble_key: str | None = None  # key of the combined judgment (ensembles only)
    final_key: str | None = None  # key of the verified judgment (--verify-low only)

    def id_keys(self) -> list[tuple[str, str, str]]:
        """(key, query_id, doc_id) of each content key of this pair."""
        qid, did = self.pair.query.query_id, self.pair.doc.doc_id
        keys = [*self.keys, self.verify_key, self.ensemble_key, self.final_key]
        return [(k, qid, did) for k in keys if k is not None]
