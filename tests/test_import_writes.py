"""The store's side of a results import: the lines a worker reads in file order
(`ExportState.lines_in_order`); what the writing process does with the rows workers made
(`Store.write_stored_parts`: rows already made;
`ExportState.set_outcomes_at`: outcomes by place);
and the garbage collector left to the work (`grader.batch.files.export_files.frozen_gc`)."""

from __future__ import annotations

import gc
import pickle
import weakref
from collections.abc import Iterable
from pathlib import Path

import pytest

from grader.batch.files.export_files import frozen_gc
from grader.batch.files.exports import ExportState, Line, runs_of
from grader.batch.files.import_work import Answer, RangeResult
from grader.store.judgment_rows import StoredRow, from_journal_row
from grader.store.store import Store
from tests.helpers.judgments import FP, failed, ok

KEY_A = "sha256:" + "a" * 64
KEY_B = "sha256:" + "b" * 64


def test_stored_rows_equal_the_journal_rows_in_parts(tmp_path: Path) -> None:
    other = {**FP, "model": "m2"}
    items = [
        (ok(KEY_A, grade=3), FP),
        (failed(KEY_B), FP),
        (ok(KEY_B, grade=0).model_copy(update={"judges": {"a": 0, "b": 1}}), other),
        (failed(KEY_A), None),
    ]
    with Store(tmp_path / "s.db", secrets=["fits"]) as store:  # a secret masked in the JSON
        assert store.stored_rows(items) == [
            from_journal_row(r) for r in store.rows(items).judgments
        ]


def test_rows_in_parts_read_back_as_put_many_writes_them(tmp_path: Path) -> None:
    judgments = [ok(KEY_A, grade=3, qid="q1", did="d1"), failed(KEY_B, qid="q1", did="d2")]
    with Store(tmp_path / "a.db") as a, Store(tmp_path / "b.db") as b:
        a.put_many((j, FP) for j in judgments)
        rows = [from_journal_row(r) for r in b.rows((j, FP) for j in judgments).judgments]
        assert b.write_stored_parts([rows])[0] == 2
        assert b.get_many([KEY_A, KEY_B]) == a.get_many([KEY_A, KEY_B])
        pairs = [(q, d, j.key) for q, d, j in b.iter_pair_judgments()]
        assert pairs == [(q, d, j.key) for q, d, j in a.iter_pair_judgments()]
        assert pairs == [("q1", "d1", KEY_A), ("q1", "d2", KEY_B)]


def test_rows_can_be_written_without_their_id_pairs(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        rows = [
            from_journal_row(r) for r in store.rows([(ok(KEY_A, qid="q9", did="d9"), FP)]).judgments
        ]
        assert store.write_stored_parts([rows], pairs=False)[0] == 1
        assert list(store.iter_pair_judgments()) == []  # left to whoever listed them
        assert (
            store.write_stored_parts([rows])[0] == 0
        )  # the same row again: only its pair is added
        assert [(q, d) for q, d, _ in store.iter_pair_judgments()] == [("q9", "d9")]


def test_writing_the_same_rows_twice_changes_nothing(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        rows = [from_journal_row(r) for r in store.rows([(ok(KEY_A), FP)]).judgments]
        assert store.write_stored_parts([rows])[0] == 1
        assert store.write_stored_parts([rows])[0] == 0  # an ok answer keeps its place
        later = [from_journal_row(r) for r in store.rows([(failed(KEY_A), FP)]).judgments]
        assert store.write_stored_parts([later])[0] == 0  # never replaced by a failure
        assert store.get_many([KEY_A])[KEY_A].status == "ok"


def test_a_failure_is_replaced_by_an_ok_answer(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        first = [from_journal_row(r) for r in store.rows([(failed(KEY_A), FP)]).judgments]
        assert store.write_stored_parts([first])[0] == 1
        then = [from_journal_row(r) for r in store.rows([(ok(KEY_A), FP)]).judgments]
        assert store.write_stored_parts([then])[0] == 1
        got = store.get_many([KEY_A])[KEY_A]
        assert got.status == "ok" and got.grade == 2


def _rows(export_id: str, lines: list[Line]) -> list[tuple[str, int, int, str, str, str]]:
    return [(export_id, x.file_no, x.line_no, x.key, x.query_id, x.doc_id) for x in lines]


def test_outcomes_are_set_by_place(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store, ExportState(store) as state:
        state.add_export("e1", {"model": "m"}, str(tmp_path))
        lines = [
            Line(KEY_A, 1, 1, "q1", "d1", None),
            Line(KEY_B, 1, 2, "q1", "d2", None),
        ]
        state.add_lines("e1", _rows("e1", lines), 2)
        state.set_outcomes_at("e1", [(1, 2, "failed")])
        got = state.lines("e1", [KEY_A, KEY_B])
        assert got[KEY_A].outcome is None
        assert got[KEY_B].outcome == "failed"
        state.set_outcomes_at("e1", [(1, 1, "ok"), (1, 2, "ok")])
        assert {k: x.outcome for k, x in state.lines("e1", [KEY_A, KEY_B]).items()} == {
            KEY_A: "ok",
            KEY_B: "ok",
        }


def test_collecting_by_hand_frees_cycles_and_restores_the_collector() -> None:
    class Node:
        def __init__(self) -> None:
            self.me = self

    assert gc.isenabled()
    with frozen_gc(by_hand=True):
        assert not gc.isenabled()
        frozen = gc.get_freeze_count()
        assert frozen > 0  # what was alive on entry is left out of collections
        node = Node()
        ref = weakref.ref(node)
        del node
        assert ref() is not None  # a cycle waits for a collection by hand
        gc.collect()
        assert ref() is None
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0


def test_collecting_by_hand_keeps_the_collector_off_when_it_was_off() -> None:
    gc.disable()
    try:
        with frozen_gc(by_hand=True):
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def _export_of(state: ExportState, tmp_path: Path, n: int) -> list[Line]:
    state.add_export("e1", {"model": "m"}, str(tmp_path))
    lines = [
        Line(f"sha256:{i:064x}", 1 + i // 7, 1 + i % 7, f"q{i // 3}", f"d{i}", None)
        for i in range(n)
    ]
    state.add_lines("e1", _rows("e1", lines), n)
    return lines


def test_lines_read_in_file_order_equal_lines_looked_up_by_key(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store, ExportState(store) as state:
        lines = _export_of(state, tmp_path, 30)
        state.set_outcomes_at("e1", [(1, 3, "ok")])
        keys = [x.key for x in lines]
        orders = [
            keys[:10],  # one file's lines in order, and past its end
            keys[5:25],  # across files
            keys[::-1],  # reversed: every key but the first found one by one
            [keys[4], keys[2], keys[9], keys[0]],
            [keys[3], "sha256:" + "f" * 64, keys[4]],  # a key the export never asked
            ["sha256:" + "e" * 64, keys[1]],  # the first key unknown
        ]
        for order in orders:
            assert state.lines_in_order("e1", order) == state.lines("e1", order)
        assert state.lines_in_order("e1", keys[:4])[keys[2]].outcome == "ok"
        assert state.lines_in_order("e1", []) == {}


def test_keys_in_file_order_are_read_without_a_lookup_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Store(tmp_path / "s.db") as store, ExportState(store) as state:
        keys = [x.key for x in _export_of(state, tmp_path, 30)]
        asked: list[list[str]] = []
        by_key = state.lines

        def counted(export_id: str, wanted: Iterable[str]) -> dict[str, Line]:
            asked.append(list(wanted))
            return by_key(export_id, asked[-1])

        monkeypatch.setattr(state, "lines", counted)
        assert len(state.lines_in_order("e1", keys[:7])) == 7  # request file 1, in order
        assert asked == [keys[:1]]  # the first key alone was looked up


def test_a_range_result_crosses_processes_whole() -> None:
    with Store(":memory:") as store:
        [row] = [from_journal_row(r) for r in store.rows([(ok(KEY_A), FP)]).judgments]
    answers = [
        Answer(KEY_A, "e1", 1, 1, None, None, "ok", None, row),
        Answer(KEY_B, "e1", 1, 2, "ok", "ok", None, None, None),
    ]
    result = RangeResult(answers=answers, truncated=["f:3"], n_malformed=1)
    back = pickle.loads(pickle.dumps(result))
    assert back == result
    assert [type(a) for a in back.answers] == [Answer, Answer]
    assert type(back.answers[0].row) is StoredRow
    assert back.answers[0].row.source == row.source


def test_outcomes_are_set_by_runs_of_consecutive_lines_only() -> None:
    places = [
        (1, 1, "ok"),
        (1, 2, "ok"),
        (1, 4, "ok"),  # line 3 not answered: a run must not cover it
        (1, 5, "failed"),
        (1, 6, "ok"),
        (2, 7, "ok"),  # another file
        (2, 8, "ok"),
    ]
    assert list(runs_of(places)) == [
        (1, 1, 2, "ok"),
        (1, 4, 4, "ok"),
        (1, 5, 5, "failed"),
        (1, 6, 6, "ok"),
        (2, 7, 8, "ok"),
    ]
    assert list(runs_of([])) == []


def test_a_gap_in_the_answered_lines_keeps_its_line_unanswered(tmp_path: Path) -> None:
    with Store(tmp_path / "s.db") as store:
        state = ExportState(store)
        state.add_export("e1", {}, str(tmp_path))
        keys = [f"sha256:{i:064x}" for i in range(1, 5)]
        rows = [("e1", 1, n, k, "q", f"d{n}") for n, k in enumerate(keys, start=1)]
        state.add_lines("e1", rows, len(rows))
        state.set_outcomes_at("e1", [(1, 1, "ok"), (1, 2, "ok"), (1, 4, "ok")])
        assert [x.line_no for x in state.lines_with(None, "e1", 1)] == [3]
