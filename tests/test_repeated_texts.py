"""Pairs whose texts repeat under other ids: one content key, one request, but every id pair in
every output of `grade`, `regrade` (live and Batch API), `batch collect` and `sample`, and in
the store; the regrade diff counts id pairs.

The data: query q2 has q1's text, docs d2 and d3 have d1's text, so the 10 id pairs of the run
hold 6 distinct contents (q1/d1, q1/d2, q2/d1 and q2/d3 are one). The fake server grades by
content, with a different table for the new prompt, so the diff is known by hand.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from calibration.spotcheck.sampling import draw_sample
from grader.cli.main import main
from grader.io.judgments import read_judgments
from grader.keys import content_key
from grader.models import Doc, Query
from grader.regrade.selection import select_candidates
from grader.store.store import Store
from grader.store.writing import text_rows
from tests.fake_batch import BatchPlan, FakeBatchAPI
from tests.fakeserver import FakeServer
from tests.helpers.batch_api import fresh_batch_api
from tests.helpers.judgments import stored_judgments
from tests.helpers.repeated_texts import (
    CONTENTS,
    DOCS,
    ID_PAIRS,
    QUERIES,
    Files,
    as_old_store,
    asked_contents,
    grade_fn,
    grade_words,
    hand_diff,
    new_grade,
    old_grade,
    pairs_of,
    qrels_of,
    request_content,
    store_pairs,
)
from tests.helpers.sampling import make_judgment


@pytest.fixture
def api(
    batch_server: tuple[FakeServer, FakeBatchAPI], monkeypatch: pytest.MonkeyPatch
) -> FakeBatchAPI:
    batch_api = fresh_batch_api(batch_server, monkeypatch)
    batch_api.server.grade_fn = grade_fn()
    return batch_api


@pytest.fixture
def files(api: FakeBatchAPI, tmp_path: Path) -> Files:
    return Files(tmp_path, api.server.base_url)


def test_the_data_repeats_texts() -> None:
    assert len(ID_PAIRS) == 10 and len(CONTENTS) == 6
    hand = hand_diff()
    # 5 pairs 3->2 (four id pairs of one content), 2 pairs 1->1, 2 pairs 0->0, 1 pair 0->1.
    assert hand["transition"] == [[2, 1, 0, 0], [0, 2, 0, 0], [0, 0, 0, 0], [0, 0, 5, 0]]
    assert hand["changed"] == 6
    # p_o = 4/10; p_e = (3*2 + 2*3) / 100 = 0.12; kappa = 0.28 / 0.88
    assert hand["kappa"] == pytest.approx(0.28 / 0.88, abs=1e-12)


def test_grade_asks_each_content_once_and_the_store_lists_every_id_pair(
    files: Files, api: FakeBatchAPI, tmp_path: Path
) -> None:
    out = tmp_path / "old.jsonl"
    assert files.grade("--out", str(out)) == 0
    asked = asked_contents(api.server)
    assert len(asked) == 6 and set(asked) == CONTENTS
    assert sorted(pairs_of(out)) == sorted(ID_PAIRS)
    with Store(files.db) as store:
        assert store.count() == 6  # one judgment per content key
    assert store_pairs(files.db, "1") == {(q, d): old_grade(q, d) for q, d in ID_PAIRS}


@pytest.mark.slow
def test_live_regrade_outputs_and_diff_cover_every_id_pair(
    files: Files, api: FakeBatchAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert files.grade() == 0
    api.server.reset()
    out, qrels = tmp_path / "new.jsonl", tmp_path / "new.qrels"
    code, diff = files.regrade(capsys, "--out", str(out), "--qrels-out", str(qrels))
    assert code == 0
    asked = asked_contents(api.server)
    assert len(asked) == 6 and set(asked) == CONTENTS  # one request per distinct content
    assert diff["selected"] == 10 and diff["sent"] == 10 and diff["requests"] == 6
    hand = hand_diff()
    assert diff["n"] == hand["n"] == 10
    assert diff["changed"] == hand["changed"] and diff["transition"] == hand["transition"]
    assert diff["kappa_between_versions"] == pytest.approx(hand["kappa"], abs=1e-12)
    assert diff["failed"] == 0 and diff["pending"] == 0
    new = read_judgments(out)
    assert sorted((j.query_id, j.doc_id) for j in new) == sorted(ID_PAIRS)
    assert all(j.prompt is not None and j.prompt.version == "2" for j in new)
    assert qrels_of(qrels) == {(q, d): new_grade(q, d) for q, d in ID_PAIRS}
    # Each content is paid once: the cost is that of the 6 distinct judgments.
    per_key = {j.key: j.cost for j in new if j.cost is not None}
    assert len(per_key) == 6 and diff["cost"] == pytest.approx(sum(per_key.values()))
    assert diff["cost"] < sum(j.cost or 0.0 for j in new)
    assert store_pairs(files.db, "2") == {(q, d): new_grade(q, d) for q, d in ID_PAIRS}
    # A rerun sends nothing and writes the same outputs.
    api.server.reset()
    code, again = files.regrade(capsys, "--out", str(out))
    assert code == 0 and api.server.counts["requests"] == 0
    assert again["sent"] == 0 and again["n"] == 10 and again["transition"] == hand["transition"]
    assert sorted(pairs_of(out)) == sorted(ID_PAIRS)


@pytest.mark.slow
def test_batch_regrade_and_collect_cover_every_id_pair(
    files: Files, api: FakeBatchAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert files.grade() == 0
    api.server.reset()
    api.plan(BatchPlan(polls_in_progress=1))  # still running when --no-wait exits
    code, first = files.regrade(capsys, "--batch", "--no-wait")
    assert code == 0 and first["pending"] == 10 and first["n"] == 10
    assert first["sent"] == 10 and first["requests"] == 6
    (batch_id,) = api.batches
    lines = api.input_lines(batch_id)
    assert len(lines) == 6 and {request_content(line["body"]) for line in lines} == CONTENTS
    collect = ["batch", "collect", "--store", str(files.db), "--base-url", files.url]
    assert main([*collect, "--poll-interval", "0", "--prices", str(files.prices)]) == 0
    assert "(10 pairs): 6 graded from the batch" in capsys.readouterr().err
    assert api.server.counts["requests"] == 0  # nothing went live
    # What collect wrote: every id pair has its new judgment in the store.
    assert store_pairs(files.db, "2") == {(q, d): new_grade(q, d) for q, d in ID_PAIRS}
    out, qrels = tmp_path / "new.jsonl", tmp_path / "new.qrels"
    code, diff = files.regrade(capsys, "--batch", "--out", str(out), "--qrels-out", str(qrels))
    assert code == 0 and diff["sent"] == 0 and api.counts["upload"] == 1
    hand = hand_diff()
    assert (diff["n"], diff["changed"], diff["failed"]) == (10, hand["changed"], 0)
    assert diff["transition"] == hand["transition"]
    assert diff["kappa_between_versions"] == pytest.approx(hand["kappa"], abs=1e-12)
    assert diff["batch_graded"] == 10
    assert diff["cost_without_batch"] == pytest.approx(2 * diff["cost"])
    assert sorted(pairs_of(out)) == sorted(ID_PAIRS)
    assert qrels_of(qrels) == {(q, d): new_grade(q, d) for q, d in ID_PAIRS}


def test_failed_counts_every_id_pair_of_a_failed_content(
    files: Files, api: FakeBatchAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert files.grade() == 0
    api.server.reset()
    api.server.grade_fn = grade_fn(failing=("tides", "moon"))
    out, qrels = tmp_path / "new.jsonl", tmp_path / "new.qrels"
    code, diff = files.regrade(
        capsys, "--max-attempts", "2", "--out", str(out), "--qrels-out", str(qrels)
    )
    assert code == 1
    moon = {(q, d) for q, d in ID_PAIRS if grade_words(QUERIES[q], DOCS[d]) == ("tides", "moon")}
    assert moon == {("q1", "d1"), ("q1", "d2"), ("q2", "d1"), ("q2", "d3")}
    asked = asked_contents(api.server)
    assert set(asked) == CONTENTS
    assert all(asked.count(c) == 1 for c in CONTENTS if grade_words(*c) != ("tides", "moon"))
    hand = hand_diff(failed=moon)
    assert diff["failed"] == 4 and diff["n"] == 10
    assert {(f["query_id"], f["doc_id"]) for f in diff["failed_pairs"]} == moon
    assert diff["changed"] == hand["changed"] == 2
    assert diff["transition"] == hand["transition"]
    assert diff["kappa_between_versions"] == pytest.approx(hand["kappa"], abs=1e-12)
    new = read_judgments(out)
    assert sorted((j.query_id, j.doc_id) for j in new) == sorted(ID_PAIRS)
    assert {(j.query_id, j.doc_id) for j in new if j.status == "failed"} == moon
    assert set(qrels_of(qrels)) == ID_PAIRS - moon


def test_sample_holds_every_id_pair_with_its_texts(
    files: Files, api: FakeBatchAPI, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "old.jsonl"
    assert files.grade("--out", str(out)) == 0
    sample = tmp_path / "sample.csv"
    args = ["sample", "--judgments", str(out), "--store", str(files.db), "--out", str(sample)]
    assert main([*args, "--n", "10", "--strategy", "uniform", "--seed", "3"]) == 0
    with sample.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert sorted((r["query_id"], r["doc_id"]) for r in rows) == sorted(ID_PAIRS)
    for row in rows:
        assert row["query"] == QUERIES[row["query_id"]]
        assert row["document"] == DOCS[row["doc_id"]]
    manifest = json.loads(sample.with_name("sample.manifest.json").read_text("utf-8"))
    listed = {(p["query_id"], p["doc_id"]): p for p in manifest["pairs"]}
    assert set(listed) == ID_PAIRS
    assert all(p["inclusion_probability"] == 1.0 for p in listed.values())
    # A stratified half: each id pair is its own unit (population 10, not 6 contents).
    half = tmp_path / "half.csv"
    assert main([*args[:-1], str(half), "--fraction", "0.5", "--strategy", "stratified"]) == 0
    manifest = json.loads(half.with_name("half.manifest.json").read_text("utf-8"))
    assert "of 10 eligible" in capsys.readouterr().out
    assert {(p["query_id"], p["doc_id"]) for p in manifest["pairs"]} <= ID_PAIRS
    assert len(manifest["pairs"]) == 5


def test_draw_sample_treats_id_pairs_sharing_a_key_as_separate_units() -> None:
    shared = [
        make_judgment(q, d, old_grade(q, d)).model_copy(
            update={"key": content_key({"judge": "test"}, QUERIES[q], DOCS[d])}
        )
        for q, d in sorted(ID_PAIRS)
    ]
    assert len({j.key for j in shared}) == 6
    draw = draw_sample(shared, strategy="whole-queries", n=10, seed=1)
    assert draw.population == 10
    assert {(p.query_id, p.doc_id) for p in draw.pairs} == ID_PAIRS
    uniform = draw_sample(shared, strategy="uniform", n=4, seed=2)
    assert len(uniform.pairs) == 4
    assert all(p.inclusion_probability == pytest.approx(0.4) for p in uniform.pairs)


def test_an_older_store_is_migrated_and_a_grade_rerun_records_the_other_pairs(
    files: Files, api: FakeBatchAPI
) -> None:
    assert files.grade() == 0
    as_old_store(files.db)
    with Store(files.db) as store:
        assert store.schema_version >= 3
        # Readable: each judgment under the id pair its row names.
        rows = {(j.query_id, j.doc_id) for j in stored_judgments(store)}
        assert {(q, d) for q, d, _ in store.iter_pair_judgments()} == rows
        assert len(rows) == 6
        assert len(select_candidates(store, [], {"judge": "x"})) == 6
    api.server.reset()
    assert files.grade() == 0  # everything cached: no request, every id pair recorded
    assert api.server.counts["requests"] == 0
    with Store(files.db) as store:
        assert {(q, d) for q, d, _ in store.iter_pair_judgments()} == ID_PAIRS
        candidates = select_candidates(store, [], {"judge": "x"})
    assert {(c.query.query_id, c.doc.doc_id) for c in candidates} == ID_PAIRS
    assert all(c.old.grade == old_grade(c.query.query_id, c.doc.doc_id) for c in candidates)


def test_store_put_records_every_id_pair_of_a_key(tmp_path: Path) -> None:
    q1, q2 = Query(query_id="q1", text="same"), Query(query_id="q2", text="same")
    doc = Doc(doc_id="d1", text="text")
    judgment = make_judgment("q1", "d1", 2).model_copy(update={"key": "k"})
    with Store(tmp_path / "s.db") as store:
        store.put_many([(judgment, None)])
        store.put_text_rows(*text_rows([q1], [doc]))
        store.put_many([(judgment.model_copy(update={"query_id": "q2"}), None)])
        store.put_text_rows(*text_rows([q2], [doc]))
        store.put_pairs([("k", "q3", "d1"), ("k", "q3", "d1"), ("unstored", "q4", "d1")])
        assert store.count() == 1
        listed = [(q, d, j.key) for q, d, j in store.iter_pair_judgments()]
    # q4's key has no judgment: not listed until one is stored.
    assert listed == [("q1", "d1", "k"), ("q2", "d1", "k"), ("q3", "d1", "k")]
