"""The texts of a spot-check sample: where they come from, and how much of each the LLM saw."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grader.cli.flags import DEFAULT_STORE
from grader.errors import InputError
from grader.models import Doc, Query


def sample_texts(
    args: argparse.Namespace, pairs: list[tuple[str, str]]
) -> tuple[dict[str, Query], dict[str, Doc]]:
    """Query and document texts for the sample: --queries/--docs, else --store, else the default
    store of `relgrade grade` (./relgrade.db) when present. With none of them the sample is still
    drawn (ids only) and a warning says how to add the texts."""
    qids = {q for q, _ in pairs}
    dids = {d for _, d in pairs}
    if args.queries or args.docs:
        if not (args.queries and args.docs):
            raise InputError(
                "--queries and --docs go together",
                hint="pass both (or --store DB, which keeps the texts graded)",
            )
        from grader.io.docs import read_docs, read_queries

        return read_queries(args.queries), read_docs(args.docs, ids=dids)
    store_path = args.store
    default = store_path == DEFAULT_STORE
    if default and Path(store_path).is_file():
        print(f"texts taken from the store {DEFAULT_STORE}", file=sys.stderr)
    if default and not Path(store_path).is_file():
        print(
            "warning: no texts for the sample (ids only): pass --queries Q --docs D or --store DB "
            "so that people see the query and document",
            file=sys.stderr,
        )
        return {}, {}
    from grader.store.store import Store

    if not Path(store_path).is_file():
        raise InputError("store not found", path=store_path, hint="the --store given to grade")
    store = Store(store_path)
    try:
        return store.queries(qids), store.docs(dids)
    finally:
        store.close()
