"""Tables of the Python API's grading: pairs given as a DataFrame with their texts, the queries
a PyTerrier result frame carries, and a grading run's judgments as a DataFrame."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from grader.errors import InputError
from grader.grading.pairs import Pair, make_pairs
from grader.grading.report import GradingReport
from grader.io.docs import docs_of, queries_of
from grader.io.python_inputs import (
    DOC_ID,
    QUERY_ID,
    check_texts,
    id_text,
    one_text_per_id,
    run_inputs,
)
from grader.models import Doc, Query

# The first columns of a judgments table; the rest follow the judgments JSONL's order.
COLUMNS = ["query_id", "doc_id", "grade", "status", "reason", "judge", "prompt"]


def pairs_from_table(pairs: pd.DataFrame, docs: Any = None) -> tuple[list[Pair], dict[str, Doc]]:
    """Pairs given with their texts (or without a `text` column, `docs`' texts)."""
    names = {"query_id": QUERY_ID, "doc_id": DOC_ID, "query": ("query",), "text": ("text",)}
    if "text" not in pairs.columns and docs is not None:
        did = next((c for c in DOC_ID if c in pairs.columns), None)
        if did is not None:
            ids = id_text(pairs[did], "pairs DataFrame")
            source = docs_of(docs)
            loaded = source(set(ids)) if callable(source) else source
            texts = {d: doc.text for d, doc in loaded.items()}
            pairs = pairs.assign(text=ids.map(texts))
            if pairs["text"].isna().any():
                missing = pairs.loc[pairs["text"].isna(), did].iloc[0]
                raise InputError(f"no text for doc {missing!r} in docs=", hint="give every doc")
    found = {k: next((c for c in v if c in pairs.columns), None) for k, v in names.items()}
    lacking = [k for k, v in found.items() if v is None]
    if lacking:
        raise InputError(
            f"the pairs DataFrame has columns {', '.join(map(str, pairs.columns))}: it lacks "
            f"{', '.join(lacking)}; expected query_id, doc_id, query, text (or PyTerrier's "
            "qid, docno, query, text)",
            hint="or give runs= with queries= and docs=",
        )
    cols = [str(found[k]) for k in names]
    pairs = pairs.reset_index(drop=True)  # rows are named by their place
    pairs = pairs.assign(**{c: id_text(pairs[c], "pairs DataFrame") for c in cols[:2]})
    check_texts(pairs, cols[2:], "pairs DataFrame")
    for id_col, text_col in zip(cols[:2], cols[2:], strict=True):
        one_text_per_id(pairs[id_col], pairs[text_col], "pairs DataFrame")
    rows = pairs[cols].astype(str).drop_duplicates(subset=cols[:2]).itertuples(index=False)
    queries: dict[str, Query] = {}
    by_id: dict[str, Doc] = {}
    for qid, did, query, text in rows:
        queries.setdefault(qid, Query(query_id=qid, text=query))
        by_id.setdefault(did, Doc(doc_id=did, text=text))
    keys = list(pairs[cols[:2]].drop_duplicates().itertuples(index=False))
    return make_pairs((queries[q] for q, _ in keys), (by_id[d] for _, d in keys)), by_id


def queries_in_runs(runs: Any) -> dict[str, Query] | None:
    """The `query` column of PyTerrier run frames, as the queries when none are given."""
    found: dict[str, Query] = {}
    for _, run in run_inputs(runs):
        if isinstance(run, pd.DataFrame) and "query" in run.columns:
            qid = next((c for c in QUERY_ID if c in run.columns), None)
            if qid is not None:
                found.update(queries_of(run[[qid, "query"]].drop_duplicates(subset=[qid])))
    return found or None


def judgments_table(report: GradingReport) -> pd.DataFrame:
    """Every output judgment in pair order, one row each as `--out` writes it: `grade` nullable
    (never 0 for a failure), `prompt` as `name@version`, `error` as `Type: message`."""
    records = [json.loads(line) for block in report.blocks() for line in block.lines.splitlines()]
    for record in records:
        prompt = record.get("prompt")
        record["prompt"] = f"{prompt['name']}@{prompt['version']}" if prompt else None
        error = record.get("error")
        record["error"] = f"{error['type']}: {error['message']}" if error else None
        usage = record.pop("usage", None) or {}
        for name in ("prompt_tokens", "completion_tokens", "cached_tokens"):
            record[name] = usage.get(name, 0)
    frame = pd.DataFrame.from_records(records)
    if frame.empty:
        frame = pd.DataFrame(columns=COLUMNS)
    frame["grade"] = frame["grade"].astype("Int64")
    others = [c for c in frame.columns if c not in COLUMNS]
    return frame[COLUMNS + others]
