"""An unchanged rerun streams stored answers to its outputs (issue 12): the same bytes as the
first run's `--out` and `--qrels-out`, stored ok answers decided by one set-based lookup (no
claims, no judgment loaded), pairs with repeated texts rebound to their own ids, and a run that
mixes stored and new answers keeps pair order."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from grader.cli.main import main
from grader.errors import StoreError
from grader.grading.pairs import Pair
from grader.judges.lexical.config import load_lexical_config
from grader.judges.lexical.judge import LexicalJudge
from grader.keys import ContentKeys
from grader.models import Doc, Judgment, Query
from grader.store import reading as lookup
from grader.store.claims import ClaimBook
from grader.store.store import Store
from tests.helpers.scripted_judge import run_grading

QUERIES = {
    "q1": "how do tides work",
    "q2": "how do tides work",  # q1's text under another id
    "qé": "ünïcode sunlight sugar",
}
MOON = "Tides rise and fall because the moon pulls on the oceans."
DOCS = {
    "d1": MOON,
    "d2": MOON,  # d1's text under other ids
    "d3": MOON,
    "d4": "Plants turn sunlight, water and carbon dioxide into sugar.",
    "dö5": 'A "used" car loses value quickly\tin its first years.',
}
RUN = {"q1": ["d1", "d2", "d4", "dö5"], "q2": ["d1", "d3", "d4"], "qé": ["d2", "d4", "dö5"]}


def write_files(folder: Path) -> list[str]:
    """The grade arguments (lexical judge, no store or outputs yet) for the data above."""
    queries, docs, run = folder / "q.tsv", folder / "docs.jsonl", folder / "run.txt"
    queries.write_text("".join(f"{q}\t{t}\n" for q, t in QUERIES.items()), encoding="utf-8")
    docs.write_text(
        "".join(json.dumps({"doc_id": d, "text": t}) + "\n" for d, t in DOCS.items()),
        encoding="utf-8",
    )
    run.write_text(
        "".join(
            f"{q} Q0 {d} {r} {10 - r} bm25\n"
            for q, ds in RUN.items()
            for r, d in enumerate(ds, start=1)
        ),
        encoding="utf-8",
    )
    args = ["grade", "--queries", queries, "--docs", docs, "--run", run, "--judge", "lexical"]
    return [str(a) for a in args]


def test_rerun_writes_the_first_runs_outputs_byte_for_byte(tmp_path: Path) -> None:
    args = write_files(tmp_path)
    store = str(tmp_path / "store.db")
    first = ["--store", store, "--out", str(tmp_path / "1.jsonl")]
    first += ["--qrels-out", str(tmp_path / "1.qrels"), "--quiet"]
    again = ["--store", store, "--out", str(tmp_path / "2.jsonl")]
    again += ["--qrels-out", str(tmp_path / "2.qrels"), "--quiet"]
    assert main([*args, *first]) == 0
    assert main([*args, *again]) == 0
    out1, out2 = (tmp_path / "1.jsonl").read_bytes(), (tmp_path / "2.jsonl").read_bytes()
    assert out2 == out1
    assert (tmp_path / "2.qrels").read_bytes() == (tmp_path / "1.qrels").read_bytes()
    ids = [(j["query_id"], j["doc_id"]) for j in map(json.loads, out2.decode().splitlines())]
    assert ids == [(q, d) for q, ds in RUN.items() for d in ds]  # every id pair, in order
    with Store(store) as s:  # 10 id pairs, 6 distinct contents: one judgment per content
        assert s.count() == 6


def test_a_lexical_run_never_loads_the_openai_sdk(tmp_path: Path) -> None:
    """A fresh process grading with the lexical judge (first run and rerun) leaves the openai
    SDK, about a second to import, unloaded."""
    args = [*write_files(tmp_path), "--store", str(tmp_path / "store.db"), "--quiet"]
    code = (
        "import sys\n"
        "from grader.cli.main import main\n"
        f"assert main({args!r}) == 0 and main({args!r}) == 0\n"
        "print('openai' in sys.modules)\n"
    )
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "False"


def _pairs() -> list[Pair]:
    queries = {q: Query(query_id=q, text=t) for q, t in QUERIES.items()}
    docs = {d: Doc(doc_id=d, text=t) for d, t in DOCS.items()}
    return [Pair(queries[q], docs[d]) for q, ds in RUN.items() for d in ds]


def _judge() -> LexicalJudge:
    docs = [Doc(doc_id=d, text=t) for d, t in DOCS.items()]
    return LexicalJudge(docs, load_lexical_config())


@pytest.mark.parametrize("scan_ratio", [0, 4], ids=["probe-keys", "scan-judgments"])
def test_a_rerun_mixing_stored_and_new_answers_keeps_pair_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scan_ratio: int
) -> None:
    monkeypatch.setattr(lookup, "SCAN_RATIO", scan_ratio)
    pairs, judge = _pairs(), _judge()
    with Store(tmp_path / "s.db") as store:
        part = [pairs[i] for i in (1, 4, 8)]
        run_grading(part, [judge], store=store, stream_final=True)
        mixed = run_grading(pairs, [judge], store=store, stream_final=True)
        assert mixed.stored_outputs is not None
        # q1/d1, q1/d2, q2/d1, q2/d3 share one content (stored by pairs 1 and 4), and qé/d4
        assert list(mixed.stored_outputs.order) == [1, 1, 0, 0, 1, 1, 0, 0, 1, 0]
        assert mixed.cached == 5 and mixed.graded == 5 and mixed.done() == len(pairs)
        loaded = run_grading(pairs, [judge], store=store)
    assert loaded.stored_outputs is None and loaded.cached == len(pairs)
    blocks = list(mixed.blocks())
    lines = "".join(b.lines for b in blocks).splitlines()  # equal as JSON (issue 28)
    assert [json.loads(line) for line in lines] == [
        json.loads(j.model_dump_json()) for j in loaded.judgments
    ]
    assert "".join(b.qrels for b in blocks).splitlines() == [
        f"{j.query_id} 0 {j.doc_id} {j.grade}" for j in loaded.judgments
    ]
    # every id pair is listed in the store, also those first answered under other ids
    with Store(tmp_path / "s.db") as store:
        listed = {(q, d) for q, d, _ in store.iter_pair_judgments()}
    assert listed == {(p.query.query_id, p.doc.doc_id) for p in pairs}


def test_stored_final_answers_are_not_claimed_or_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pairs, judge = _pairs(), _judge()
    with Store(tmp_path / "s.db") as store:
        run_grading(pairs, [judge], store=store, stream_final=True)

        def refuse(*_: object, **__: object) -> object:
            raise AssertionError("an unchanged rerun must neither claim nor load judgments")

        monkeypatch.setattr(ClaimBook, "claim_many", refuse)
        monkeypatch.setattr(Store, "get_many", refuse)
        monkeypatch.setattr(Judgment, "model_validate_json", refuse)
        report = run_grading(pairs, [judge], store=store, stream_final=True)
    assert report.cached == len(pairs) and report.requests == 0 and report.judgments == []
    assert report.stored_ok == 6 and report.stored_failed == 0 and report.pending == 0


def test_a_stored_answer_removed_before_the_outputs_are_written_is_a_store_error(
    tmp_path: Path,
) -> None:
    pairs, judge = _pairs(), _judge()
    with Store(tmp_path / "s.db") as store:
        run_grading(pairs, [judge], store=store, stream_final=True)
        report = run_grading(pairs, [judge], store=store, stream_final=True)
    assert report.stored_outputs is not None
    _, qid, did, key = report.stored_outputs.rows[2]
    with sqlite3.connect(tmp_path / "s.db") as conn:
        conn.execute("DELETE FROM judgments WHERE key = ?", (key,))
    conn.close()
    with pytest.raises(StoreError, match=f"stored judgment of {qid} {did}"):
        list(report.blocks())


@pytest.mark.parametrize("scan_ratio", [0, 4], ids=["probe-keys", "scan-judgments"])
def test_look_up_without_the_id_pair_check_gives_the_same_statuses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scan_ratio: int
) -> None:
    monkeypatch.setattr(lookup, "SCAN_RATIO", scan_ratio)
    pairs, judge = _pairs(), _judge()
    with Store(tmp_path / "s.db") as store:
        run_grading(pairs[:4], [judge], store=store, stream_final=True)
        dry = run_grading(pairs, [judge], store=store, stream_final=True, dry_run=True)
    maker = ContentKeys(judge.fingerprint())
    keys: list[lookup.Row] = [
        (maker.digest(p.query.text, p.doc.text), p.query.query_id, p.doc.doc_id) for p in pairs
    ]
    full = lookup.look_up(tmp_path / "s.db", keys)
    bare = lookup.look_up(tmp_path / "s.db", keys, listed=False)
    assert (bare.ok, bare.rowids, bare.stored_ok) == (full.ok, full.rowids, full.stored_ok)
    assert bare.unlisted == [] and full.stored_ok == 3 and full.stored_failed == 0
    # q2/d3 shares q1/d1's stored answer but its id pair is not listed yet
    assert ("q2", "d3") in {keys[i][1:] for i in full.unlisted}
    # q1's 4 pairs stored 3 contents, which 7 of the 10 pairs have
    assert dry.cached == 7 and dry.stored_ok == 3 and dry.pending == 3 and dry.requests == 0
