"""The two planners of a grading run fed the same random reruns (grader/grading/run.py).

`GradingRun.plan` loads every stored answer; `_plan_streamed` (one judge, no verifier, a store:
`relgrade grade`'s path) decides "stored ok" by one set-based lookup and leaves those outputs in
the store. Hypothesis draws pairs whose texts repeat under other ids, a first run over some of
them (some answers failed), then reruns all of them both ways on two copies of the store, later
answers failing elsewhere, dry or not: the counts, the outputs in pair order, and what the store
holds afterwards must be the same.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from grader.grading.pairs import Pair
from grader.grading.report import GradingReport
from grader.models import Doc, Query
from grader.store.store import Store
from tests.helpers.hypothesis_scale import examples
from tests.helpers.scripted_judge import GradeFn, ScriptedJudge, run_grading

TEXTS = ["tides", "moon", "sugar", "caf\u00e9", 'a "quoted"\ttext']
COUNTS = ["pairs", "cached", "graded", "failed", "pending", "requests"]
COUNTS += ["stored_ok", "stored_failed"]


def _pairs(ids: list[tuple[int, int]], qtexts: list[int], dtexts: list[int]) -> list[Pair]:
    """Pairs of (query, doc) ids, each id's text drawn from TEXTS (shared among ids)."""
    return [
        Pair(
            Query(query_id=f"q{q}", text=TEXTS[qtexts[q]]),
            Doc(doc_id=f"d{d}", text=TEXTS[dtexts[d]]),
        )
        for q, d in ids
    ]


def _grades(failing: set[int]) -> GradeFn:
    """A grade from the texts; None (a failed answer) when the doc text is in `failing`."""
    return lambda q, d: None if TEXTS.index(d.text) in failing else (len(q.text) + len(d.text)) % 4


def _outputs(report: GradingReport) -> tuple[list[dict[str, Any]], list[str]]:
    """The report's outputs in pair order (JSON lines without their time, qrels lines)."""
    lines, qrels = [], []
    for block in report.blocks():
        for line in block.lines.splitlines():
            value = json.loads(line)
            value.pop("created_at", None)  # when a new answer was made: differs between runs
            lines.append(value)
        qrels += block.qrels.splitlines()
    return lines, qrels


def _held(path: Path) -> tuple[list[Any], list[tuple[str, str, str, str]]]:
    """(key, status) of every stored judgment, and (query, doc, key, status) of every id pair
    listed."""
    with sqlite3.connect(path) as conn:
        judgments = sorted(conn.execute("SELECT hex(key), status FROM judgments"))
    conn.close()
    with Store(path) as store:
        listed = sorted((q, d, j.key, str(j.status)) for q, d, j in store.iter_pair_judgments())
    return judgments, listed


@settings(max_examples=examples(100), deadline=None)
@given(
    ids=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 6)), min_size=1, max_size=14),
    qtexts=st.lists(st.integers(0, len(TEXTS) - 1), min_size=4, max_size=4),
    dtexts=st.lists(st.integers(0, len(TEXTS) - 1), min_size=7, max_size=7),
    first=st.sets(st.integers(0, 13)),
    failing_first=st.sets(st.integers(0, len(TEXTS) - 1), max_size=2),
    failing_again=st.sets(st.integers(0, len(TEXTS) - 1), max_size=2),
    dry_run=st.booleans(),
)
def test_both_planners_give_the_same_rerun(
    ids: list[tuple[int, int]],
    qtexts: list[int],
    dtexts: list[int],
    first: set[int],
    failing_first: set[int],
    failing_again: set[int],
    dry_run: bool,
) -> None:
    pairs = _pairs(list(dict.fromkeys(ids)), qtexts, dtexts)
    with tempfile.TemporaryDirectory() as folder:
        streamed_db, loaded_db = Path(folder) / "s.db", Path(folder) / "l.db"
        with Store(streamed_db) as store:
            before = [p for i, p in enumerate(pairs) if i in first]
            if before:
                run_grading(before, [ScriptedJudge("j", _grades(failing_first))], store=store)
        for suffix in ("", "-wal", "-shm"):
            if Path(f"{streamed_db}{suffix}").exists():
                shutil.copy(f"{streamed_db}{suffix}", f"{loaded_db}{suffix}")
        reports = []
        for path, stream in ((streamed_db, True), (loaded_db, False)):
            judge = ScriptedJudge("j", _grades(failing_again))
            with Store(path) as store:
                report = run_grading(
                    pairs, [judge], store=store, stream_final=stream, dry_run=dry_run
                )
            assert (report.stored_outputs is not None) == stream
            reports.append((report, sorted(judge.calls)))
        (streamed, streamed_calls), (loaded, loaded_calls) = reports
        assert streamed_calls == loaded_calls
        for name in COUNTS:
            assert getattr(streamed, name) == getattr(loaded, name), name
        if not dry_run:
            assert _outputs(streamed) == _outputs(loaded)
        else:
            assert sorted(streamed.to_send) == sorted(loaded.to_send)
        assert _held(streamed_db) == _held(loaded_db)
