"""Which (query, document) pairs to grade: the top `depth` of each run, merged and filtered.

From each TREC run, the top `depth` documents per query in trec_eval's order (score descending,
ties by doc id descending; the file's rank column is not trusted). Pairs are deduplicated across
runs (the first run that names a pair decides its place in the order), pairs already graded by
people (`skip_judged` qrels) are left out, and ids absent from the queries or documents are
either one `InputError` listing the count and the first few, or skipped and counted.

`docs` may be a loader, called once with the doc ids the selection needs (after depth,
deduplication and `skip_judged`): `relgrade grade` streams a large docs file through it and
keeps only those documents.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from grader.errors import InputError
from grader.io.grades import read_human_grades
from grader.io.trec import read_run
from grader.metrics.ranking import Precision
from grader.models import Doc, Query

SHOW_IDS = 5  # how many missing ids an error names

DocLoader = Callable[[set[str]], Mapping[str, Doc]]
"""The documents of the given ids (those it has), e.g. `lambda ids: read_docs(path, ids=ids)`."""


@dataclass(frozen=True)
class Pair:
    """One (query, document) pair to grade."""

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


def _first(ids: list[str]) -> str:
    shown = ", ".join(ids[:SHOW_IDS])
    return shown + (", ..." if len(ids) > SHOW_IDS else "")


def pairs_to_grade(
    runs: Sequence[str | Path],
    queries: Mapping[str, Query],
    docs: Mapping[str, Doc] | DocLoader,
    *,
    depth: int = 10,
    skip_judged: Sequence[str | Path] = (),
    skip_missing: bool = False,
    precision: Precision = "float32",
) -> PairSelection:
    """The pairs to grade from `runs` (see the module docstring); raises InputError on unknown
    ids unless `skip_missing`."""
    if depth < 1:
        raise InputError(f"--depth must be at least 1, not {depth}")
    if not runs:
        raise InputError("no run given", hint="pass at least one --run RUN")
    judged: set[tuple[str, str]] = set()
    for qrels_path in skip_judged:
        frame = read_human_grades(qrels_path, clamp=True)  # qrels or CSV; any grade counts
        judged.update(zip(frame["query_id"], frame["doc_id"], strict=True))

    selection = PairSelection()
    seen: set[tuple[str, str]] = set()
    missing_q: dict[str, None] = {}
    missing_d: dict[str, None] = {}
    first_missing_run: Path | None = None
    wanted: list[tuple[str, str, Path]] = []
    for run_path in map(Path, runs):
        frame = read_run(run_path, precision=precision)
        top = frame[frame["rank"] <= depth]
        # Plain lists: iterating the frame's Arrow-backed columns costs ~2.5 us per value.
        for qid, did in zip(top["query_id"].tolist(), top["doc_id"].tolist(), strict=True):
            selection.candidates += 1
            pair_id = (qid, did)
            if pair_id in seen:
                selection.duplicates += 1
                continue
            seen.add(pair_id)
            if pair_id in judged:
                selection.judged += 1
                continue
            wanted.append((qid, did, run_path))
    if selection.candidates and callable(docs):
        docs = docs({did for _, did, _ in wanted})
    found: Mapping[str, Doc] = docs if isinstance(docs, Mapping) else {}
    for qid, did, run_path in wanted:
        query = queries.get(qid)
        doc = found.get(did)
        if query is None or doc is None:
            selection.missing += 1
            if query is None:
                missing_q[qid] = None
            if doc is None:
                missing_d[did] = None
            if first_missing_run is None:
                first_missing_run = run_path
            continue
        selection.pairs.append(Pair(query, doc))
    if not selection.candidates:
        raise InputError(
            "found no pairs to grade: "
            + ("the run holds" if len(runs) == 1 else "none of the runs holds")
            + " a result (empty, or only comments)",
            path=runs[0] if len(runs) == 1 else ", ".join(str(r) for r in runs),
            hint="give runs with lines `qid Q0 docid rank score tag`",
        )
    selection.missing_query_ids = list(missing_q)
    selection.missing_doc_ids = list(missing_d)
    if selection.missing and not skip_missing:
        parts = []
        if missing_q:
            parts.append(f"{len(missing_q)} unknown query id(s) ({_first(list(missing_q))})")
        if missing_d:
            parts.append(f"{len(missing_d)} unknown doc id(s) ({_first(list(missing_d))})")
        raise InputError(
            f"{selection.missing} pair(s) to grade name ids absent from the queries or docs: "
            + " and ".join(parts),
            path=first_missing_run,
            hint="add them to --queries / --docs, or pass --skip-missing to leave those pairs out",
        )
    return selection
